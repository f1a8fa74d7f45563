"""The chaos suite's pieces: worker fleets, the history checker, the lost-reply proxy, the
claim storm and the session report."""
