#!/usr/bin/env python3
"""Builds the seed corpora (fuzz/corpus/TARGET/) from the repository's examples and the
manifests and tenancy configurations embedded in the crates' tests. Deterministic; run
from anywhere. The corpora are regenerated, not committed (fuzz/corpus is ignored)."""

import hashlib
import json
import pathlib
import re
import shutil

import yaml

FUZZ = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ.parent
CORPUS = FUZZ / "corpus"

KINDS = [
    ("v1", "Pod"),
    ("v1", "Namespace"),
    ("v1", "Node"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("extensions/v1beta1", "NetworkPolicy"),
    ("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicy"),
    ("policy.networking.k8s.io/v1alpha1", "BaselineAdminNetworkPolicy"),
    ("policy.networking.k8s.io/v1alpha2", "ClusterNetworkPolicy"),
    ("v1", "PodList"),
    ("v1", "List"),
]

# Hostile text in places a renderer could echo: label values, annotations, names.
HOSTILE = """apiVersion: v1
kind: Pod
metadata:
  name: evil
  namespace: x
  labels: {app: "a", note: "drop-accept"}
  annotations: {x: "\\"; flush ruleset; #\\n}"}
status: {podIP: 10.0.0.66}
spec:
  containers: [{name: c, ports: [{name: http, containerPort: 80}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: drop, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{ports: [{port: http}], from: [{ipBlock: {cidr: "10.0.0.0/8", except: ["10.1.0.0/16"]}}]}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: evil-rules}
spec:
  priority: 3
  subject: {namespaces: {}}
  ingress:
  - {name: "x\\"; flush ruleset\\n#", action: Deny, from: [{namespaces: {}}]}
  egress:
  - {name: "}\\r\\ntable ip evil {", action: Pass, to: [{networks: ["0.0.0.0/0"]}]}
"""


def write(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def raw_strings(path):
    text = path.read_text()
    return re.findall(r'r#"(.*?)"#', text, re.S)


def manifests():
    cluster = (ROOT / "examples/xyz/cluster.yaml").read_text()
    out = [cluster, HOSTILE]
    policies = sorted((ROOT / "examples/xyz/policies").glob("*.yaml"))
    policies += sorted((ROOT / "crates/lab/tests/fixtures").rglob("*.yaml"))
    for p in policies:
        out.append(cluster + "\n---\n" + p.read_text())
    for src in sorted(ROOT.glob("crates/*/tests/*.rs")) + sorted(ROOT.glob("crates/*/src/lib.rs")):
        for s in raw_strings(src):
            if "kind:" in s and "groups:" not in s:
                out.append(s)
                out.append(cluster + "\n---\n" + s)
    return out


def tenancy():
    out = [p.read_text() for p in sorted((ROOT / "examples/tenancy").glob("*.yaml"))]
    for src in sorted(ROOT.glob("crates/tenancy/**/*.rs")):
        out += [s for s in raw_strings(src) if "groups" in s or "tools" in s]
    return out


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    docs = manifests()
    for text in docs:
        write("load_yaml", text)
        write("yaml_readers", text)
        write("nft_render", text)
        write("neutron", text)
        try:
            values = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError:
            continue
        if len(values) == 1:
            write("load_json", json.dumps(values[0], default=str))
        else:
            write("load_json", json.dumps({"apiVersion": "v1", "kind": "List", "items": values}, default=str))
        for v in values:
            if not isinstance(v, dict) or (v.get("apiVersion"), v.get("kind")) not in KINDS:
                continue
            i = KINDS.index((v["apiVersion"], v["kind"]))
            body = {k: x for k, x in v.items() if k not in ("apiVersion", "kind")}
            write("objects", bytes([i]) + yaml.safe_dump(body, sort_keys=False).encode())
    for text in tenancy():
        write("tenancy", text)
    for i, s in enumerate(["x", "a.b-c", "kubernetes.io/metadata.name", "v1.2_3", "http",
                           "10.0.0.0/8", "2001:db8::1/64", "a" * 64, "::ffff:10.0.0.1/104"]):
        for which in range(6):
            write("validators", bytes([which]) + s.encode())
    for target in ("selector", "cidr"):
        write(target, bytes(range(64)))
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} seeds")


if __name__ == "__main__":
    main()
