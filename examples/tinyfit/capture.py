#!/usr/bin/env python3
"""capture — a hardware capsule: a closed tinyfit run's best.pth applied to captured inputs.

A capsule is not a training run. It binds a capture, its decode and the closed model run it applied
(each by id and SHA-256, the model run's best.pth by its SHA-256) and holds the forward results, with
no weights. These captures have no machine-readable ground truth, so the test declares
ground_truth_status=unavailable_no_machine_readable_gt and metric_applicability=not_applicable: its rows
are finite forward outputs, its visuals are predictions only, and metrics.json states no metric.
RemoteGPU seals it under export/hardware/<run-id> (create the run as a hardware capsule) and custody
checks that the model run is a verified run of the project whose run.json and best.pth are those bytes.

Config (flat `key: value` lines, as tinyfit's): model_export (the model run's sealed export on this box),
capture_seed, captures, condition, test_id, and optionally selection_manifest (the project's fixed visual
selection, `<project>/_trust/selections/<id>.json`: custody reads it from the box and checks it).
Writes to $REMOTEGPU_OUTPUT_DIR: run.json and
test/<test-id>/{metrics.json, results.parquet, vis/<condition>/prediction/<sample-id>.png}.

Run by hand: python capture.py --config capture.yaml
"""

import argparse
import hashlib
import json
import os
import struct
import sys
import zlib

import torch
from train import build_model, file_sha256, read_config, write_results

NO_GT = "unavailable_no_machine_readable_gt"
K_LIMIT = 100


def capture(config, model_config):
    """The raw sensor readings (int16, as a device would give them) and their decode to the model's input."""
    generator = torch.Generator().manual_seed(config["capture_seed"])
    raw = torch.randint(-32768, 32767, (config["captures"], model_config["features"]), generator=generator)
    raw = raw.to(torch.int16)
    decoded = raw.to(torch.float32) / 8192.0
    return raw, decoded


def png(path, rows):
    """A small grayscale PNG of rows (lists of 0–255), with no imaging library."""
    height, width = len(rows), len(rows[0])
    scanlines = b"".join(b"\x00" + bytes(row) for row in rows)

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    with open(path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanlines)))
        handle.write(chunk(b"IEND", b""))


def probability_bars(probabilities, width=64, bar=6):
    """One bar per class, its length the predicted probability."""
    rows = []
    for probability in probabilities:
        filled = int(round(float(probability) * width))
        rows += [[255] * filled + [0] * (width - filled)] * bar
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--config", default="capture.yaml")
    config = read_config(parser.parse_args(argv).config)
    model_export = config["model_export"]
    model_config = read_config(os.path.join(model_export, "config.yaml"))
    model = build_model(model_config)
    best = torch.load(os.path.join(model_export, "best.pth"), map_location="cpu", weights_only=True)
    model.load_state_dict(best["model"])
    model.eval()
    raw, decoded = capture(config, model_config)
    if os.environ.get("REMOTEGPU_SMOKE") == "1":
        with torch.no_grad():
            assert torch.isfinite(model(decoded[:2])).all()
        print("smoke ok: a forward pass on two captures", flush=True)
        return 0
    with torch.no_grad():
        logits = model(decoded)
    out_dir = os.environ.get("REMOTEGPU_OUTPUT_DIR", "output")
    test_id, condition = str(config["test_id"]), str(config["condition"])
    test_dir = os.path.join(out_dir, "test", test_id)
    os.makedirs(test_dir, exist_ok=True)
    sample_ids = torch.arange(len(decoded))
    # No ground truth: the target column holds no label (-1), and nothing is scored against it.
    write_results(os.path.join(test_dir, "results.parquet"), sample_ids, torch.full_like(sample_ids, -1), logits)
    with open(os.path.join(test_dir, "metrics.json"), "w") as handle:
        json.dump({"metric_applicability": "not_applicable", "ground_truth_status": NO_GT, "n": len(decoded)}, handle)
    selected, selection = fixed_selection(config, len(decoded))
    vis = os.path.join(test_dir, "vis", condition, "prediction")
    os.makedirs(vis, exist_ok=True)
    probabilities = torch.softmax(logits, dim=1)
    for index in selected:
        png(os.path.join(vis, f"{index}.png"), probability_bars(probabilities[index]))
    run = {
        "run_id": os.environ.get("REMOTEGPU_RUN_ID", "manual"),
        "capsule": "hardware",
        "capture": {"id": f"synthetic-sensor-seed{config['capture_seed']}", "sha256": sha256_of(raw)},
        "decode": {"id": "int16-over-8192-float32", "sha256": sha256_of(decoded)},
        "model_run": {
            "id": os.path.basename(os.path.normpath(model_export)),
            "sha256": file_sha256(os.path.join(model_export, "run.json")),
            "best_pth_sha256": file_sha256(os.path.join(model_export, "best.pth")),
        },
        "seed": config["capture_seed"],
        **({"selection": selection} if selection else {}),
        "tests": {test_id: {"ground_truth_status": NO_GT, "metric_applicability": "not_applicable"}},
        "population": {test_id: {"ids": sample_ids.tolist()}},
        "visuals": {
            test_id: {"sample_ids": [str(i) for i in selected], "conditions": [condition], "roles": ["prediction"]}
        },
    }
    with open(os.path.join(out_dir, "run.json"), "w") as handle:
        json.dump(run, handle, indent=2)
    print(f"done: {len(decoded)} captures forwarded, {len(selected)} prediction visuals", flush=True)
    return 0


def fixed_selection(config, n):
    """The K samples drawn: the project's fixed selection where the config names its manifest
    (`_trust/selections/<id>.json`, bound here by its SHA-256), else the first K by position; never
    ranked by performance."""
    path = config.get("selection_manifest")
    if not path:
        return list(range(min(K_LIMIT, n))), None
    with open(path, "rb") as handle:
        manifest = handle.read()
    selected = [int(sample) for sample in json.loads(manifest)["sample_ids"]]
    name = os.path.basename(path)[: -len(".json")]
    return selected, {"selection_id": name, "manifest_sha256": hashlib.sha256(manifest).hexdigest()}


def sha256_of(tensor):
    return hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()


if __name__ == "__main__":
    sys.exit(main())
