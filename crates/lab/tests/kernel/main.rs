//! Kernel tests: real packets through network-namespace nodes must be allowed and denied
//! exactly as the evaluator says.
//!
//! Each test builds its own lab of the x/y/z × a/b/c cluster (`examples/xyz/cluster.yaml`:
//! nine pods serving 80 and 81 on TCP and UDP, and the external host 192.0.2.10), so the
//! tests run in parallel: [`single_node`] on the cluster as written (every pod on one
//! node), [`nodes`] with the pods spread over two and three nodes
//! (`tests/fixtures/clusters`); [`services`] through Service addresses
//! (`tests/fixtures/services`); [`dns`] a pod looking names up at a real DNS server
//! (`dnsmasq`) on the external host and connecting at once. Every policy set is a file in
//! `tests/fixtures/sets`. The responders and probers are this crate's
//! `palisade-lab-helper` binary.
//!
//! They need root (network namespaces, `nft`, `conntrack`, and `dnsmasq` for [`dns`]); run
//! as another user or without `dnsmasq`, each test prints why it is skipped and passes (and
//! fails under `CI=true`).

mod dns;
mod harness;
mod nodes;
mod services;
mod single_node;
