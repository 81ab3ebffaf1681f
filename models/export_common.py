"""What the exporters of models/ share: running each export, one failure never stopping the others,
and keeping the folder's MANIFEST.json (one entry per model, by name, sorted)."""
import json
import os
import sys
import time


def run_exports(tool, out_dir, opset, jobs):
    """Runs `jobs`, a list of (label, export) where export() returns the model's manifest entry (a
    dict with "name"), prints a line per job, merges the entries into out_dir/MANIFEST.json and
    exits with an error naming the failed jobs, if any."""
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "MANIFEST.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {m["name"]: m for m in json.load(f)["models"]}
    failed = []
    for label, export in jobs:
        t0 = time.time()
        try:
            entry = export()
            manifest[entry["name"]] = entry
            print("%-30s ok  %6.1f s" % (label, time.time() - t0), flush=True)
        except Exception as e:  # one bad export never stops the others
            failed.append(label)
            print("%-30s FAILED: %s" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__), flush=True)
    with open(manifest_path, "w") as f:
        json.dump({"opset": opset, "models": [manifest[k] for k in sorted(manifest)]}, f, indent=1)
        f.write("\n")
    if failed:
        sys.exit("%s: failed: %s" % (tool, ", ".join(failed)))
