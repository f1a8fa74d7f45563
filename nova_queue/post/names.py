"""Where a finished job's artifacts live in the result store. No RQ, no Pillow: the web
gallery and ``nova-queue results`` import this for the names alone."""

from __future__ import annotations

import dataclasses

from nova_queue.stores import artifact_key

MANIFEST_NAME = "manifest.json"
SHEET_NAME = "contact-sheet.png"


def artifact_names(job_id: str) -> tuple[str, ...]:
    """File names of a job's artifacts (manifest, contact sheet, zip), in that order."""
    return (MANIFEST_NAME, SHEET_NAME, f"{job_id}.zip")


@dataclasses.dataclass(frozen=True)
class ArtifactKeys:
    """Where one job's artifacts live in the store."""

    manifest: str
    contact_sheet: str
    zip: str

    @classmethod
    def for_job(cls, job_id: str) -> ArtifactKeys:
        """The keys of ``job_id``'s artifacts (``jobs/<job>/<name>``)."""
        manifest, sheet, zip_name = artifact_names(job_id)
        return cls(manifest=artifact_key(job_id, manifest),
                   contact_sheet=artifact_key(job_id, sheet), zip=artifact_key(job_id, zip_name))

    def to_json(self) -> dict[str, str]:
        """The keys by artifact: ``manifest``, ``contact_sheet``, ``zip``."""
        return dataclasses.asdict(self)
