"""Benchmark: our crawl vs per-object HeadObject vs a single-threaded boto3 paginator.

One moto server (its own process, seeded through its backend) serves every method over
HTTP; each method runs in its own client process so its peak RSS is its own. Two
buckets: SPEED (objects over many daily prefixes) compares requests and objects/s;
MEMORY (ten times larger) compares peak RSS growth with the paginator that keeps the
whole listing in memory (what S3Hook.list_keys does). HeadObject is timed on a sample
and needs one request per object by construction.

    .venv-worker/bin/python benchmarks/crawl.py [--objects 20000] [--memory-objects 200000]

Last line: ``RESULT crawl objects=N requests=R naive_requests=N request_ratio=X
objects_per_s=O paginator_objects_per_s=P speedup=O/P memory_objects=M rss_growth_mb=G
baseline_rss_growth_mb=B isa=I`` (I: the CPU's vector extensions, benchmarks/machine.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

from machine import print_machine, result_line  # this folder is on sys.path

HERE = os.path.abspath(__file__)
REPO = os.path.dirname(os.path.dirname(HERE))
ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}
PER_PREFIX = 1000


def _keys(objects: int) -> list[str]:
    return [f"corpus/dt={2000 + i // PER_PREFIX // 366:04d}-{1 + i // PER_PREFIX % 366:03d}/"
            f"part-{i % PER_PREFIX:05d}.parquet" for i in range(objects)]


def serve(port: int, buckets: dict[str, int]) -> None:
    """The moto server process: seed through the backend, then serve until stdin closes."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for bucket, objects in buckets.items():
        backend.create_bucket(bucket, "us-east-1")
        for key in _keys(objects):
            backend.put_object(bucket, key, b"x" * 64)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print("READY", flush=True)
    sys.stdin.read()
    server.stop()


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def client(method: str, bucket: str, objects: int, workers: int) -> dict:
    """One method in this process; returns its figures (RSS growth measured after imports)."""
    import boto3

    from synthfactory.crawl import command

    def crawl(prefix: str) -> dict:
        with tempfile.TemporaryDirectory() as out:
            parser = argparse.ArgumentParser()
            command.add_arguments(parser)
            return command.run(parser.parse_args(
                ["--source", f"s3://{bucket}/{prefix}", "--out", out, "--workers", str(workers)]))

    # warm up on an empty prefix: lazy imports, botocore's data files, the thread pool,
    # so that RSS growth below is the listing's own, for every method alike
    crawl("warm-up-empty")
    boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix="warm-up-empty/")
    base = _rss_mb()
    started = time.perf_counter()
    s3 = boto3.client("s3")  # inside the timed region, as our crawl makes its own client
    if method == "ours":
        summary = crawl("corpus")
        listed, requests = summary["objects"], summary["requests"]
    elif method == "paginator":
        everything, requests = [], 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="corpus/"):
            requests += 1
            everything.extend(page.get("Contents", ()))
        listed = len(everything)
    else:  # one HeadObject per object, timed on a sample: objects/s is what matters
        sample = _keys(objects)[:: max(1, objects // 500)]
        for key in sample:
            s3.head_object(Bucket=bucket, Key=key)
        listed, requests = len(sample), len(sample)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"method": method, "objects": listed, "requests": requests, "seconds": seconds,
            "objects_per_s": listed / seconds, "peak_rss_mb": peak,
            "rss_growth_mb": max(0.0, peak - base)}


def _run_client(method: str, bucket: str, objects: int, workers: int, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, HERE, "--client", method, "--bucket", bucket,
         "--objects", str(objects), "--workers", str(workers)],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--memory-objects", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--serve", type=int)
    parser.add_argument("--client")
    parser.add_argument("--bucket")
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, json.loads(sys.stdin.readline()))
    if args.client:
        print(json.dumps(client(args.client, args.bucket, args.objects, args.workers)))
        return

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, **ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "PYTHONPATH": REPO}
    buckets = {"bench-speed": args.objects, "bench-memory": args.memory_objects}
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, HERE, "--serve", str(port)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    server.stdin.write(json.dumps(buckets) + "\n")
    server.stdin.flush()
    assert server.stdout.readline().strip() == "READY"
    print(f"moto server seeded with {sum(buckets.values())} objects in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    print_machine()
    try:
        results = {}
        for method in ("ours", "paginator", "head"):
            results[method] = r = _run_client(method, "bench-speed", args.objects, args.workers,
                                               env)
            print(f"speed  {method:<9} objects={r['objects']} requests={r['requests']} "
                  f"objects/s={r['objects_per_s']:.0f} peak_rss_mb={r['peak_rss_mb']:.0f} "
                  f"rss_growth_mb={r['rss_growth_mb']:.1f}", flush=True)
        memory = {}
        for method in ("ours", "paginator"):
            memory[method] = r = _run_client(method, "bench-memory", args.memory_objects,
                                              args.workers, env)
            print(f"memory {method:<9} objects={r['objects']} requests={r['requests']} "
                  f"objects/s={r['objects_per_s']:.0f} peak_rss_mb={r['peak_rss_mb']:.0f} "
                  f"rss_growth_mb={r['rss_growth_mb']:.1f}", flush=True)
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a loaded machine: its figures are in already
            server.kill()
            server.wait()
    print_machine()

    ours, paginator = results["ours"], results["paginator"]
    assert ours["objects"] == paginator["objects"] == args.objects, (ours, paginator)
    assert memory["ours"]["objects"] == memory["paginator"]["objects"] == args.memory_objects
    naive_requests = args.objects  # HeadObject: one request per object
    print(f"ours rss growth: {ours['rss_growth_mb']:.1f} MB at {args.objects} objects, "
          f"{memory['ours']['rss_growth_mb']:.1f} MB at {args.memory_objects}; paginator "
          f"{paginator['rss_growth_mb']:.1f} -> {memory['paginator']['rss_growth_mb']:.1f} MB; "
          f"HeadObject {results['head']['objects_per_s']:.0f} objects/s")
    print(result_line(
        "crawl", objects=args.objects, requests=ours["requests"],
        naive_requests=naive_requests,
        request_ratio=f"{naive_requests / ours['requests']:.1f}",
        objects_per_s=f"{ours['objects_per_s']:.0f}",
        paginator_objects_per_s=f"{paginator['objects_per_s']:.0f}",
        speedup=f"{ours['objects_per_s'] / paginator['objects_per_s']:.2f}",
        # growth of the peak RSS over the RSS after warm-up, at --memory-objects
        memory_objects=args.memory_objects,
        rss_growth_mb=f"{memory['ours']['rss_growth_mb']:.1f}",
        baseline_rss_growth_mb=f"{memory['paginator']['rss_growth_mb']:.1f}",
    ))


if __name__ == "__main__":
    main()
