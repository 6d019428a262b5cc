"""Benchmark: memory of a served classical model under 500 mixed requests, on 127.0.0.1.

1. Trains the demo config's LightGBM context model (`--kind tfidf`: the TF-IDF baseline) on a
   small synthetic corpus into a temporary MLflow store and registers it (or serves `--model URI`
   from `--tracking-uri`). Needs no data: the sentences are the synthetic corpus's, each made
   distinct with a number so that no cache flatters the figures.
2. Builds `--requests` requests (fixed seed): small lists of sentences (`inputs`), dialogues
   (`dataframe_records` with `doc_id` and speakers), mid-size tables (`dataframe_split`), a few
   `--large-mb` bodies, a few bad requests (400) and a few bodies over the 20 MiB limit (413).
3. Starts `psyattrs serve` in a child process, measures its resident memory (all processes of
   its session, sampled every 50 ms): idle once /ping answers and one warm-up sentence is
   predicted (the Korean morpheme analyser, about 0.5 GB, loads on first use), the peak under
   load, and after the load once it has settled 3 s; sends the requests from `--clients`
   threads; stops the server.
4. With `--reference`, does the same against MLflow's own `mlflow models serve` on the same model
   (what `psyattrs serve` ran before), with each request's rows sent as a `dataframe_split` with
   `doc_id` (the form it accepts); the bodies over the limit are not sent to it (it has no limit
   and would predict them: minutes of work), so they count as skipped there.

Bounded: `--requests` requests (at most 5000), `--time-limit` seconds of load per server
(requests not started by then are skipped and counted). Prints one table.

    .venv/bin/python benchmarks/serve_benchmark.py [--requests 500] [--kind lightgbm] [--reference]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from _docs import add_docs_option, changed, docs_page, wants_docs  # benchmarks/_docs.py

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
LIMIT_MB = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_rss_mb(sid: int) -> float:
    """Resident memory of every live process of a session, in MiB."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) != sid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1024


class Sampler(threading.Thread):
    """Samples a session's resident memory every 50 ms into `samples`."""

    def __init__(self, sid: int):
        super().__init__(daemon=True)
        self.sid = sid
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append(session_rss_mb(self.sid))
            self.stop.wait(0.05)


def train_model(kind: str, dialogues: int, root: Path) -> tuple[str, str]:
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from psyattrs.serving.registry import register

    uri = f"sqlite:///{root / 'mlflow.db'}"
    name = "demo.yaml" if kind == "lightgbm" else "baseline_tfidf.yaml"
    config = load_config(REPO / "experiments" / name, [f"data.synthetic.dialogues={dialogues}", f"tracking.uri={uri}",
                                                         "tracking.experiment=serve-benchmark"])
    result = train(config, quiet=True)
    return register(result.run_id, "psyattrs-serve-benchmark", tracking_uri=uri).uri, uri


def sentence_pool(n: int = 4000) -> list[str]:
    from psyattrs.synth import synthesize

    texts = [t for t in synthesize(60, seed=11).utterances["text"].tolist() if t.strip()]
    return texts[:n]


def build_requests(count: int, large_mb: float, pool: list[str], seed: int = 0) -> list[dict]:
    """The request mix: dicts with `kind`, `body` (psyattrs form) and `reference` (dataframe_split
    with doc_id, or the same bytes for bad and oversized bodies)."""
    rng = random.Random(seed)
    counter = iter(range(10**9))

    def sentence() -> str:
        return f"{rng.choice(pool)} {next(counter)}"

    def reference(rows: list[tuple[str, str, str]]) -> bytes:
        data = [[d, t, p] for d, t, p in rows]
        return json.dumps({"dataframe_split": {"columns": ["doc_id", "text", "person_type"], "data": data}},
                          ensure_ascii=False).encode("utf-8")

    def dumps(value) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")

    n_large = max(1, round(count * 0.01))
    n_over = max(1, round(count * 0.01))
    n_bad = max(1, round(count * 0.05))
    n_split = round(count * 0.10)
    n_dialogue = round(count * 0.20)
    kinds = (["large"] * n_large + ["over limit"] * n_over + ["bad"] * n_bad + ["table"] * n_split
             + ["dialogue"] * n_dialogue)
    kinds += ["sentences"] * (count - len(kinds))
    rng.shuffle(kinds)
    sample = [sentence() for _ in range(1000)]
    row_bytes = len(dumps({"inputs": {"doc_id": [f"c0_{j // 30}" for j in range(1000)], "text": sample}})) / 1000
    rows_per_mb = int(1024 * 1024 / row_bytes)  # rows of the columns form in one MiB
    over = None
    bad_bodies = [dumps({"dataframe_records": [{"text": "안녕", "is_pause": "yes"}]}), b"{not json",
                  dumps({"inputs": ["", "안녕"]}), dumps({"dataframe_records": [{"text": 5}]}),
                  b'{"inputs": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"]
    requests = []
    for i, kind in enumerate(kinds):
        if kind == "sentences":
            texts = [sentence() for _ in range(rng.randint(1, 8))]
            rows = [(f"s{j + 1}", t, "") for j, t in enumerate(texts)]
            body = dumps({"inputs": texts})
        elif kind == "dialogue":
            n = rng.randint(20, 60)
            rows = [(f"c{i}", sentence(), "persona" if j % 2 else "user") for j in range(n)]
            body = dumps({"dataframe_records": [{"doc_id": d, "text": t, "person_type": p} for d, t, p in rows]})
        elif kind == "table":
            n = rng.randint(200, 500)
            rows = [(f"c{i}_{j // 25}", sentence(), "") for j in range(n)]
            body = dumps({"dataframe_split": {"columns": ["doc_id", "text"], "data": [[d, t] for d, t, _ in rows]}})
        elif kind == "large":
            n = int(large_mb * rows_per_mb)
            rows = [(f"c{i}_{j // 30}", sentence(), "") for j in range(n)]
            body = dumps({"inputs": {"doc_id": [d for d, _, _ in rows], "text": [t for _, t, _ in rows]}})
        elif kind == "bad":
            body = bad_bodies[len(requests) % len(bad_bodies)]
            requests.append({"kind": kind, "body": body, "reference": body, "rows": 0})
            continue
        else:
            if over is None:
                n = int((LIMIT_MB + 2) * rows_per_mb)
                texts = [sentence() for _ in range(n)]
                over = dumps({"inputs": {"doc_id": [f"o{j // 30}" for j in range(n)], "text": texts}})
            requests.append({"kind": kind, "body": over, "reference": None, "rows": 0})  # see the docstring
            continue
        requests.append({"kind": kind, "body": body, "reference": reference(rows), "rows": len(rows)})
    return requests


def post(port: int, body: bytes, timeout: float) -> tuple[int, float]:
    start = time.perf_counter()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    except OSError:
        status = -1  # connection refused, reset or timed out
    return status, time.perf_counter() - start


def ping(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def run_server(label: str, command: list[str], env: dict, port: int, requests: list[dict], key: str, *,
               clients: int, time_limit: float, log: Path) -> dict:
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not ping(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{label}: the server did not start; its log ends:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        warm = json.dumps({"dataframe_split": {"columns": ["doc_id", "text"], "data": [["w", "안녕하세요"]]}},
                          ensure_ascii=False).encode("utf-8")
        assert post(port, warm, timeout=120)[0] == 200, f"{label}: the warm-up request failed"
        time.sleep(2.0)
        idle = statistics.median([session_rss_mb(process.pid) for _ in range(10)])
        sampler = Sampler(process.pid)
        sampler.start()
        stop_at = time.monotonic() + time_limit
        results: list[tuple[str, int, float]] = []
        skipped = 0

        def one(item: dict):
            if time.monotonic() > stop_at or item[key] is None:
                return None
            status, seconds = post(port, item[key], timeout=max(1.0, stop_at - time.monotonic() + 60))
            return item["kind"], status, seconds

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            for outcome in pool.map(one, requests):
                if outcome is None:
                    skipped += 1
                else:
                    results.append(outcome)
        wall = time.perf_counter() - started
        time.sleep(3.0)
        after = statistics.median([session_rss_mb(process.pid) for _ in range(10)])
        sampler.stop.set()
        sampler.join()
        return {"label": label, "idle": idle, "peak": max(sampler.samples + [after]), "after": after,
                "results": results, "skipped": skipped, "wall": wall}
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(15)


DOCS_INTRO = '`psyattrs serve` under mixed concurrent requests: resident memory idle, at peak and after the load (with `--reference`, against `mlflow models serve`).'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--kind", choices=("lightgbm", "tfidf"), default="lightgbm")
    parser.add_argument("--dialogues", type=int, default=60, help="synthetic dialogues to train on")
    parser.add_argument("--model", help="serve this model URI instead of training one")
    parser.add_argument("--tracking-uri", help="the store of --model")
    parser.add_argument("--large-mb", type=float, default=5.0, help="size of the large bodies")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client threads")
    parser.add_argument("--time-limit", type=float, default=600, help="seconds of load per server")
    parser.add_argument("--reference", action="store_true", help="also measure `mlflow models serve`")
    add_docs_option(parser)
    args = parser.parse_args()
    write = wants_docs(args, partial=changed(parser, args, "requests", "kind", "dialogues", "model", "large_mb", "clients"))
    with docs_page("serve", "Serving benchmark", write=write, intro=DOCS_INTRO):
        if not 1 <= args.requests <= 5000:
            parser.error("--requests must be in 1..5000")

        from psyattrs.serving.serve import server_environment

        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if args.model:
                model, uri = args.model, args.tracking_uri
            else:
                print(f"training the {args.kind} model on {args.dialogues} synthetic dialogues ...", flush=True)
                model, uri = train_model(args.kind, args.dialogues, root)
            requests = build_requests(args.requests, args.large_mb, sentence_pool())
            env = server_environment(uri)
            env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            runs = []
            port = free_port()
            runs.append(run_server("psyattrs serve", [sys.executable, "-m", "psyattrs", "serve", "--model", model,
                                                      "--port", str(port)], env, port, requests, "body",
                                   clients=args.clients, time_limit=args.time_limit, log=root / "psyattrs.log"))
            if args.reference:
                port = free_port()
                command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", model, "--env-manager", "local",
                           "-h", "127.0.0.1", "-p", str(port), "-w", "1", "-t", "600"]
                runs.append(run_server("mlflow models serve", command, env, port, requests, "reference",
                                       clients=args.clients, time_limit=args.time_limit, log=root / "mlflow.log"))

        kinds = {}
        for item in requests:
            kinds.setdefault(item["kind"], [0, 0])
            kinds[item["kind"]][0] += 1
            kinds[item["kind"]][1] += item["rows"]
        sizes: dict[str, int] = {}
        for item in requests:
            sizes[item["kind"]] = max(sizes.get(item["kind"], 0), len(item["body"]))
        print(f"\n{len(requests)} requests, {args.clients} clients, model: {args.kind if not args.model else model}, "
              f"{os.cpu_count()} CPUs")
        print("  mix: " + ", ".join(f"{k} {n} ({rows} rows, body {sizes[k] / 1e6:.2f} MB each at most)" if rows else
                                    f"{k} {n} (body {sizes[k] / 1e6:.2f} MB)" for k, (n, rows) in kinds.items()))
        print(f"\n| server | idle RSS MiB | peak RSS MiB | after-load RSS MiB | after - idle | done | skipped | "
              f"wall s | statuses | median s (small) | max s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for run in runs:
            statuses = {}
            for _, status, _ in run["results"]:
                statuses[status] = statuses.get(status, 0) + 1
            small = [s for kind, _, s in run["results"] if kind == "sentences"]
            longest = max((s for _, _, s in run["results"]), default=0.0)
            print(f"| {run['label']} | {run['idle']:.0f} | {run['peak']:.0f} | {run['after']:.0f} | "
                  f"{run['after'] - run['idle']:+.0f} | {len(run['results'])} | {run['skipped']} | {run['wall']:.1f} | "
                  f"{', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))} | "
                  f"{statistics.median(small) if small else float('nan'):.3f} | {longest:.1f} |")


if __name__ == "__main__":
    main()
