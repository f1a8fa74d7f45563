"""The web gallery and live dashboard (Flask + flask-sock)."""
