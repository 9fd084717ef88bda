#!/usr/bin/env python3
"""Inputs for, and agreement with, the analysers bench/compare-peers.sh runs.

  peers.py prepare SRC... --out DIR
      Reads the manifests (files or directories, like `palisade -f`) and writes, under DIR:
        np/objects.yaml       namespaces, pods (or workloads) and NetworkPolicies only
        admin/objects.yaml    the same plus AdminNetworkPolicies and the
                              BaselineAdminNetworkPolicy (no ClusterNetworkPolicy: no peer reads it)
        cyclonus/np/policies.json, cyclonus/admin/{np,anp,banp}.json   policies in the files
                              Cyclonus and policy-assistant read (one List per kind)
        model.json            the synthetic-probe model of Cyclonus and policy-assistant:
                              every pod, and one probe per probed port and protocol
        info.json             counts (pods, policies per kind, probed ports)
  peers.py compare TOOL PALISADE_JSONL TOOL_OUTPUT [--model DIR/model.json]
      Compares every probe the tool answers with Palisade's verdict; prints one JSON line
      {"tool", "answered", "agree", "disagree", "skipped", "examples": [...]}.
      TOOL: netpol-analyzer (its `list -o json`), cyclonus or policy-assistant (the
      "Combined" tables of `analyze --mode probe`).

Only the Python standard library and PyYAML (python3-yaml) are used.
"""
import argparse
import json
import os
import re
import sys

import yaml

WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob",
                  "ReplicationController"}
CLUSTER_KINDS = {"Namespace", "Pod"} | WORKLOAD_KINDS


def load(paths):
    docs = []
    for p in paths:
        files = []
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in sorted(names)
                          if n.endswith((".yaml", ".yml", ".json")) and "/." not in root + "/" + n]
        else:
            files.append(p)
        for f in sorted(files):
            with open(f) as fh:
                for d in yaml.load_all(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                    if not d:
                        continue
                    if d.get("kind", "").endswith("List") and "items" in d:
                        docs += [i for i in d["items"] if i]
                    else:
                        docs.append(d)
    return docs


def template(d):
    """The pod template of a workload (CronJob: its job's)."""
    spec = d.get("spec", {})
    if d["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    return spec.get("template", {})


def endpoints(docs):
    """(key, namespace, labels, ip, ports) per pod or workload, keyed as Palisade names them."""
    out = []
    for d in docs:
        md = d.get("metadata", {})
        ns = md.get("namespace", "default")
        if d["kind"] == "Pod":
            if d.get("spec", {}).get("hostNetwork") or d.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            key, labels, spec = f"{ns}/{md['name']}", md.get("labels") or {}, d.get("spec", {})
            ip = d.get("status", {}).get("podIP", "")
        elif d["kind"] in WORKLOAD_KINDS:
            t = template(d)
            key, labels, spec = f"{ns}/{md['name']}[{d['kind']}]", t.get("metadata", {}).get("labels") or {}, t.get("spec", {})
            ip = ""
        else:
            continue
        ports = [(p.get("protocol", "TCP"), p["containerPort"], p.get("name", ""))
                 for c in spec.get("containers", []) for p in c.get("ports", []) or []]
        out.append((key, ns, labels, ip, ports))
    return out


def write_yaml(path, docs):
    """A YAML stream of JSON documents: no reader can take a string such as `y` for a
    boolean (YAML 1.1 readers, among them Go's, do)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        for d in docs:
            fh.write("---\n")
            json.dump(d, fh)
            fh.write("\n")


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(obj, fh)


def v011(policy):
    """An admin policy with its peers in the form of network-policy-api v0.1.1, the one
    policy-assistant reads: `namespaces: {namespaceSelector: S}` and
    `pods: {namespaces: {namespaceSelector: S}, podSelector: P}` for today's
    `namespaces: S` and `pods: {namespaceSelector: S, podSelector: P}`. Other peers
    (networks, nodes) have no v0.1.1 form and are left as they are (the tool refuses them)."""
    p = json.loads(json.dumps(policy))
    for direction, key in (("ingress", "from"), ("egress", "to")):
        for rule in p["spec"].get(direction) or []:
            for peer in rule.get(key) or []:
                if "namespaces" in peer:
                    peer["namespaces"] = {"namespaceSelector": peer["namespaces"]}
                if "pods" in peer:
                    pods = peer["pods"]
                    peer["pods"] = {"namespaces": {"namespaceSelector": pods.get("namespaceSelector", {})},
                                    "podSelector": pods.get("podSelector", {})}
    return p


def as_list(kind, items, api):
    return {"apiVersion": api, "kind": kind + "List", "metadata": {}, "items": items}


def prepare(args):
    docs = load(args.src)
    by = lambda k: [d for d in docs if d.get("kind") == k]
    cluster = [d for d in docs if d.get("kind") in CLUSTER_KINDS]
    nps, anps, banps = by("NetworkPolicy"), by("AdminNetworkPolicy"), by("BaselineAdminNetworkPolicy")
    namespaces = {d["metadata"]["name"]: d["metadata"].get("labels") or {} for d in by("Namespace")}
    eps = endpoints(docs)
    for _, ns, *_ in eps:
        # A namespace only named by its objects exists, with the label the API server gives it.
        namespaces.setdefault(ns, {})
    for ns, labels in namespaces.items():
        labels.setdefault("kubernetes.io/metadata.name", ns)
    write_yaml(f"{args.out}/np/objects.yaml", cluster + nps)
    write_yaml(f"{args.out}/admin/objects.yaml", cluster + nps + anps + banps)
    write_json(f"{args.out}/cyclonus/np/policies.json", as_list("NetworkPolicy", nps, "networking.k8s.io/v1"))
    write_json(f"{args.out}/cyclonus/admin/np.json", as_list("NetworkPolicy", nps, "networking.k8s.io/v1"))
    if anps:
        write_json(f"{args.out}/cyclonus/admin/anp.json",
                   as_list("AdminNetworkPolicy", [v011(d) for d in anps], "policy.networking.k8s.io/v1alpha1"))
    if banps:
        write_json(f"{args.out}/cyclonus/admin/banp.json", v011(banps[0]))
    # Palisade probes every pod pair on every (protocol, port) that some pod declares; so does
    # the model: each pod gets a container per probed port, named as the pod names it (a pod
    # without that port gets an unnamed one, which no named port in a rule matches).
    probed = sorted({(proto, port) for *_, ports in eps for proto, port, _ in ports}, key=lambda x: (x[1], x[0]))
    pods = []
    for key, ns, labels, ip, ports in eps:
        names = {(proto, port): name for proto, port, name in ports}
        name = key.split("/", 1)[1]
        pods.append({"Namespace": ns, "Name": name, "Labels": labels, "IP": ip,
                     "Containers": [{"Name": f"c-{proto.lower()}-{port}", "Port": port, "Protocol": proto,
                                     "PortName": names.get((proto, port), "")} for proto, port in probed]})
    model = {"Resources": {"Namespaces": namespaces, "Pods": pods},
             "Probes": [{"Protocol": proto, "Port": port} for proto, port in probed]}
    write_json(f"{args.out}/model.json", model)
    write_json(f"{args.out}/info.json", {"pods": len(eps), "NetworkPolicy": len(nps), "AdminNetworkPolicy": len(anps),
                                         "BaselineAdminNetworkPolicy": len(banps),
                                         "ClusterNetworkPolicy": len(by("ClusterNetworkPolicy")),
                                         "probed": [f"{p}/{n}" for p, n in probed]})


def palisade_verdicts(path):
    """Yields ((from, to, protocol, port), allowed) from `palisade matrix -o jsonl`, without
    pairs of a pod with itself (no peer reports them); verdicts that depend on the address of
    a workload that has none are yielded as None."""
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            if r["from"] == r["to"]:
                continue
            yield (r["from"], r["to"], r["protocol"], r["port"]), (None if r.get("dependsOnAddress") else r["allowed"])


PROTO = re.compile(r"^(TCP|UDP|SCTP)\s+(.*)$")


def npa_ports(conn):
    """{protocol: [(lo, hi)]} from a netpol-analyzer connection string:
    'All Connections', 'TCP 80,UDP 53', 'TCP 1-79,81-65535,UDP 1-65535'."""
    if conn.strip() == "All Connections":
        return {p: [(1, 65535)] for p in ("TCP", "UDP", "SCTP")}
    out, proto = {}, None
    for tok in conn.split(","):
        tok = tok.strip()
        m = PROTO.match(tok)
        if m:
            proto, tok = m.group(1), m.group(2).strip()
        if proto is None or not tok:
            raise ValueError(f"cannot read connection '{conn}'")
        lo, _, hi = tok.partition("-")
        out.setdefault(proto, []).append((int(lo), int(hi or lo)))
    return out


def npa_name(s):
    # netpol-analyzer names a bare pod ns/name[Pod]; Palisade ns/name.
    return s[:-len("[Pod]")] if s.endswith("[Pod]") else s


def npa_answers(path):
    """netpol-analyzer lists allowed connections per pair; every other probe between two
    endpoints it knows is denied. Returns a lookup: probe -> allowed."""
    with open(path) as fh:
        text = fh.read()
    rows = json.loads(text[text.index("["):]) if "[" in text else []
    allowed = {}
    for r in rows:
        allowed[(npa_name(r["src"]), npa_name(r["dst"]))] = npa_ports(r["conn"])

    def lookup(probe):
        src, dst, proto, port = probe
        return any(lo <= port <= hi for lo, hi in allowed.get((src, dst), {}).get(proto, []))
    return lookup


def probe_answers(path, model):
    """The "Combined" tables of `analyze --mode probe`, one per probe of the model, in order.
    Returns a lookup: probe -> allowed, or None where the table has no such cell."""
    m = json.load(open(model))
    names = sorted(f"{p['Namespace']}/{p['Name']}" for p in m["Resources"]["Pods"])
    column = {n: i for i, n in enumerate(names)}
    probes = [(p["Protocol"], p["Port"]) for p in m["Probes"]]
    rows = {}  # (protocol, port) -> {source: [cell per destination]}
    table, in_combined, header = -1, False, False
    with open(path) as fh:
        for line in fh:
            if line.startswith("Combined:"):
                table += 1
                if table >= len(probes):
                    break  # the tool's second, empty probe of the pods read from a cluster
                in_combined, header = True, True
                current = rows.setdefault(probes[table], {})
                continue
            if not in_combined or not line.startswith("|"):
                if in_combined and line.startswith(("Ingress:", "Egress:")):
                    in_combined = False
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header:
                header = False  # tablewriter upper-cases the header; the order is the sorted names
                continue
            current[cells[0]] = cells[1:]

    def lookup(probe):
        src, dst, proto, port = probe
        row = rows.get((proto, port), {}).get(src)
        if row is None or dst not in column:
            return None
        c = row[column[dst]]
        return {".": True, "X": False}.get(c)
    return lookup


def compare(args):
    if args.tool == "netpol-analyzer":
        theirs = npa_answers(args.output)
    else:
        theirs = probe_answers(args.output, args.model)
    agree, skipped, total, diffs = 0, 0, 0, []
    for probe, mine in palisade_verdicts(args.palisade):
        total += 1
        if mine is None:
            skipped += 1
            continue
        v = theirs(probe)
        if v is None:
            continue
        if mine == v:
            agree += 1
        else:
            diffs.append({"from": probe[0], "to": probe[1], "protocol": probe[2], "port": probe[3],
                          "palisade": mine, args.tool: v})
    print(json.dumps({"tool": args.tool, "answered": agree + len(diffs), "agree": agree, "disagree": len(diffs),
                      "palisade_probes": total, "skipped_address_dependent": skipped,
                      "examples": diffs[: args.examples]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("src", nargs="+")
    p.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("tool", choices=["netpol-analyzer", "cyclonus", "policy-assistant"])
    c.add_argument("palisade")
    c.add_argument("output")
    c.add_argument("--model")
    c.add_argument("--examples", type=int, default=20)
    a = ap.parse_args()
    {"prepare": prepare, "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
