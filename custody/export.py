"""The custody record as a self-contained JSON document (what an auditor or a paper appendix needs)."""


def record_as_dict(record) -> dict:
    run = record.run
    return {
        "record": record.pk,
        "status": record.status,
        "run": {
            "run_id": run.run_id,
            "project": run.project.slug,
            "instance": run.instance.name,
            "attempt": run.attempt,
            "source_tree_sha256": run.source_tree_sha256,
            "resolved_commit": run.resolved_commit,
            "config_sha256": run.config_sha256,
            "manifest_sha256": run.manifest_sha256,
            "data_sha256": run.data_sha256,
            "environment": {key: run.env_identity.get(key) for key in ("python", "torch", "cuda", "gpu_names")},
        },
        "uri": record.uri,
        "provider": record.provider,
        "mutability": record.mutability,
        "roster_sha256": record.roster_sha256,
        "total_bytes": record.total_bytes,
        "file_count": record.file_count,
        "created": record.created.isoformat(),
        "verified_at": record.verified_at.isoformat() if record.verified_at else None,
        "consumer_location": record.consumer_location,
        "mirror": {"uri": record.mirror_uri, "verified": record.mirror_verified} if record.mirror_uri else None,
        "loaded": record.evidence.get("loaded", []),
        "metrics": record.evidence.get("metrics", []),
        "architecture": record.evidence.get("architecture"),
        "reproducibility": record.evidence.get("reproducibility"),
        "population": record.evidence.get("population"),
        "fairness": record.evidence.get("fairness"),
        "warnings": record.warnings,
        "failure": record.failure or None,
        "artifacts": [
            {"path": item.path, "bytes": item.bytes, "sha256": item.sha256, "verified": item.verified}
            for item in record.artifacts.all()
        ],
    }
