"""Keeps a bench's runs in its result file, bench/results/<name>.json, with what makes its
figures checkable: the date, the machine, the commit measured (and whether its tree was
clean). Every run is kept, never replaced: a figure is quoted from the latest with how many
earlier runs agree."""
import datetime
import json
import os
import platform
import subprocess


def _run(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine():
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(l.split()[1] for l in f if l.startswith("MemTotal")))
            memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpus": os.cpu_count(), "cpu": model, "memory": memory, "kernel": platform.release(),
            "rustc": _run("rustc", "-V")}


def write(name, commit, payload):
    """Appends this run to bench/results/<name>.json, which keeps every run of the bench:
    {"bench", "runs": [{"date", "commit", "machine", ...payload}, ...]}, oldest first. A file
    in the one-run shape of earlier versions becomes the first of the runs: nothing measured
    is dropped. commit: what the bench built (read before it started, so later edits do not
    show). Returns the path and the number of runs now kept."""
    run = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": commit, "machine": machine()}
    run.update(payload)
    os.makedirs("bench/results", exist_ok=True)
    path = f"bench/results/{name}.json"
    runs = []
    try:
        with open(path) as f:
            kept = json.load(f)
        runs = kept["runs"] if "runs" in kept else [{k: v for k, v in kept.items() if k != "bench"}]
    except FileNotFoundError:
        pass
    runs.append(run)
    with open(path + ".tmp", "w") as f:
        json.dump({"bench": f"bench/{name}", "runs": runs}, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    return path


def commit():
    """The commit checked out, with "+dirty" when what builds pgo-build (its crates' sources
    and manifests, the workspace's manifest and lock file) has uncommitted changes."""
    head = _run("git", "rev-parse", "--short", "HEAD") or "unknown"
    dirty = _run("git", "status", "--porcelain", "--untracked-files=no", "--",
                 ":(glob)crates/*/src/**", ":(glob)crates/*/Cargo.toml", "Cargo.toml", "Cargo.lock")
    return head + ("+dirty" if dirty else "")
