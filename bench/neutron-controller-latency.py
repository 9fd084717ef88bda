#!/usr/bin/env python3
"""Time from a manifest change to the end of the Neutron controller's sync.

Usage: bench/neutron-controller-latency.py DIR LOG ROUNDS

DIR is a `palisade gen` output directory (cluster/cluster.yaml, policies/policies.yaml)
that a running `palisade neutron controller --source dir:DIR ... 2> LOG` keeps in step
with Neutron, already synced. Each round makes four changes, one at a time, each written
atomically (a new file renamed over the old): a pod takes another deployment's labels,
then its own back; a policy takes another's spec, then its own back. For each change it
prints the time from the rename to the end of the sync the controller logs (its log
line's timestamp), the writes that sync made and the sync's own time.
"""

import datetime
import os
import re
import sys
import time

import yaml


def main():
    d, log, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cluster = f"{d}/cluster/cluster.yaml"
    policies = f"{d}/policies/policies.yaml"
    cl = list(yaml.safe_load_all(open(cluster)))
    po = list(yaml.safe_load_all(open(policies)))
    pods = [i for i, o in enumerate(cl) if o and o["kind"] == "Pod"]

    def write(path, docs):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            yaml.safe_dump_all(docs, f, sort_keys=False)
        os.rename(tmp, path)

    def syncs():
        with open(log) as f:
            return [line for line in f if "neutron sync:" in line]

    def measure(what, path, docs):
        n = len(syncs())
        t0 = time.time()
        write(path, docs)
        while len(syncs()) <= n:
            time.sleep(0.05)
            if time.time() - t0 > 1800:
                print(f"{what}: no sync within 30 minutes", flush=True)
                return
        line = syncs()[n]
        end = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
        writes = re.search(r"(\d+) write\(s\)", line).group(1)
        elapsed = int(re.search(r"elapsed_ms=(\d+)", line).group(1)) / 1000
        print(
            f"{what}: {end - t0:.2f} s from the file change to the end of the sync "
            f"({writes} writes, the sync {elapsed:.2f} s)",
            flush=True,
        )

    labels, spec = cl[pods[5]]["metadata"]["labels"], po[2]["spec"]
    for _ in range(rounds):
        cl[pods[5]]["metadata"]["labels"] = cl[pods[-2]]["metadata"]["labels"]
        measure("pod relabelled", cluster, cl)
        cl[pods[5]]["metadata"]["labels"] = labels
        measure("pod relabelled back", cluster, cl)
        po[2]["spec"] = po[3]["spec"]
        measure("policy edited", policies, po)
        po[2]["spec"] = spec
        measure("policy edited back", policies, po)


if __name__ == "__main__":
    main()
