//! NetworkPolicy → OpenStack Neutron security groups, the job the Kuryr-Kubernetes
//! network-policy spec describes, done exactly; and an evaluator of Neutron semantics to
//! prove the translation agrees with [`palisade_engine`].
//!
//! [`translate`] takes a compiled [`palisade_engine::Engine`] — its resolved pod sets and
//! named-port index, never selectors of its own — and returns a [`Translation`]: one
//! security group per NetworkPolicy (split when the pods it selects resolve its named
//! ports differently), member-only peer groups in [`PeerMode::RemoteGroups`],
//! `palisade-open-ingress`/`-egress` for the directions a pod is not isolated in, a
//! node-local group per node, and the groups each pod's port carries. Group names are
//! injective and at most [`MAX_NAME_LEN`] characters (`np-<namespace>/<name>[:part]…`,
//! shortened with a digest when too long). Rules are typed ([`SgRule`] with [`Traffic`]
//! and [`Remote`]) and take the Neutron API's JSON shape when serialized.
//! [`SgEvaluator`] decides connections the way Neutron would (a union of allows per
//! direction). See `docs/neutron.md`.
//!
//! ```
//! let loaded = palisade_model::load_str(r#"
//! apiVersion: v1
//! kind: Pod
//! metadata: {name: db, namespace: x, labels: {role: db}}
//! status: {podIP: 10.0.0.5}
//! ---
//! apiVersion: networking.k8s.io/v1
//! kind: NetworkPolicy
//! metadata: {name: db, namespace: x}
//! spec:
//!   podSelector: {matchLabels: {role: db}}
//!   ingress: [{from: [{ipBlock: {cidr: 1.1.1.0/24, except: [1.1.1.0/26]}}], ports: [{port: 5432}]}]
//! "#).unwrap();
//! let engine = palisade_engine::Engine::new(loaded.cluster, Default::default());
//! let (t, _) = palisade_neutron::translate(&engine, &Default::default()).unwrap();
//! let sg = t.security_groups.iter().find(|g| g.name == "np-x/db").unwrap();
//! let prefixes: Vec<String> = sg.security_group_rules.iter().filter_map(|r| match &r.remote {
//!     palisade_neutron::Remote::Prefix(net) => Some(net.to_string()),
//!     _ => None,
//! }).collect();
//! assert_eq!(prefixes, ["1.1.1.64/26", "1.1.1.128/25"]);
//! let eval = palisade_neutron::SgEvaluator::new(&t);
//! let (src, dst) = ("1.1.1.70".parse().unwrap(), "10.0.0.5".parse().unwrap());
//! assert!(eval.allows(src, dst, palisade_model::Protocol::Tcp, 5432));
//! ```

mod cidr;
mod eval;
mod groups;
mod naming;
mod translate;

pub use cidr::subtract;
pub use eval::SgEvaluator;
pub use groups::{
    AddressGroup, Ethertype, PortBinding, Remote, RuleDirection, SecurityGroup, SgRule, Traffic,
    Translation, prefixes_as_strings,
};
pub use naming::MAX_NAME_LEN;
pub use translate::{
    NeutronError, OPEN_EGRESS, OPEN_INGRESS, PeerMode, TranslateOptions, translate,
};
