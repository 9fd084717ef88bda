//! The tier-by-tier walks of the explanation panel, in parts that the page's script puts
//! together as `explain` prints them: for each row and column, its *subject* (the policies
//! its side goes through, tier by tier), and for each policy a *step table*: what the policy
//! did (matched a rule, or each rule and why it did not match) for every probe and every
//! pod or class at the other end.
//!
//! A step depends on the policy, the other end, the probe and a few traits of the subject
//! ([`Analysis::step_traits`]), not on the cell: one table per policy and traits serves every
//! row or column whose walk goes through that policy, and each distinct step is written
//! once.

use palisade_analysis::{
    AdminStepCode, Analysis, NOT_REACHED, PolicyOutcome, Probe, RuleWhy, StepTraits, WalkPolicy,
    admin_outcome_text, admin_policy_head, admin_tier_line, network_outcome_text,
    network_policy_head, network_tier_line,
};
use palisade_engine::{Engine, FastMap, PodId, Tier};
use palisade_model::Direction;
use rayon::prelude::*;

use super::Axis;
use super::tables::{Interner, NA, encode_row};

/// One row's or column's side: the first line of each tier, and the policies of each tier
/// as (head text, step table) pairs, in evaluation order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject {
    pub admin_line: u32,
    pub admin: Vec<[u32; 2]>,
    pub network_line: u32,
    pub isolated: bool,
    pub network: Vec<[u32; 2]>,
    pub baseline_line: u32,
    pub baseline: Vec<[u32; 2]>,
}

/// The walks' parts: subjects by row and column, and step tables.
pub struct Walks {
    /// The subject of each row (egress) and column (ingress): indices into `subjects`.
    pub row_subject: Vec<u32>,
    pub col_subject: Vec<u32>,
    pub subjects: Interner<Subject>,
    /// Each table's steps: per probe, one run-length-encoded row of step indices over the
    /// other axis (columns for egress, rows for ingress).
    pub tables: Vec<Vec<String>>,
    /// Each step: its text (an index into the page's texts) and whether it matched (the
    /// policies after it are not reached).
    pub steps: Vec<[u32; 2]>,
    /// The text of a policy that was not reached.
    pub not_reached: u32,
}

/// What a step says, as reasons only: equal codes of one policy read the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum StepCode {
    Admin(AdminStepCode),
    Network(Vec<RuleWhy>),
}

/// A step table to compute: the policy, the side, and the subject pods whose walk goes
/// through it (pods with the same traits; the first that is not the other end is used).
struct Table {
    policy: WalkPolicy,
    dir: Direction,
    subjects: Vec<PodId>,
}

/// The walks of `rows` (egress) and `cols` (ingress) over `probes`; texts go into `texts`.
pub fn walks(
    engine: &Engine,
    (rows, cols): (&[Axis], &[Axis]),
    probes: &[Probe],
    texts: &mut Interner<String>,
) -> Walks {
    let analysis = Analysis::new(engine);
    let mut keys: Interner<(WalkPolicy, Direction, StepTraits)> = Interner::default();
    let mut tables: Vec<Table> = Vec::new();
    let mut heads: FastMap<WalkPolicy, u32> = FastMap::default();
    let mut subjects = Interner::default();
    let mut subject_of = |axes: &[Axis], dir: Direction| -> Vec<u32> {
        axes.iter()
            .map(|a| {
                let pod = a.pods[0];
                let tiers = analysis.subject_tiers(pod, dir);
                let mut pairs = |ids: &[u32], make: fn(u32) -> WalkPolicy| -> Vec<[u32; 2]> {
                    ids.iter()
                        .map(|&i| {
                            let policy = make(i);
                            let head = *heads.entry(policy).or_insert_with(|| {
                                let info = analysis.walk_policy(policy);
                                texts.id(&match policy {
                                    WalkPolicy::Admin(_) => admin_policy_head(info),
                                    WalkPolicy::Network(_) => network_policy_head(info),
                                })
                            });
                            let key = (policy, dir, analysis.step_traits(policy, pod, dir));
                            let table = keys.get(&key).unwrap_or_else(|| {
                                tables.push(Table {
                                    policy,
                                    dir,
                                    subjects: Vec::new(),
                                });
                                keys.insert(key)
                            });
                            let t = &mut tables[table as usize];
                            if t.subjects.len() < 2 && !t.subjects.contains(&pod) {
                                t.subjects.push(pod);
                            }
                            [head, table]
                        })
                        .collect()
                };
                let admin = pairs(&tiers.admin, WalkPolicy::Admin);
                let network = pairs(&tiers.network, WalkPolicy::Network);
                let baseline = pairs(&tiers.baseline, WalkPolicy::Admin);
                let subject = Subject {
                    admin_line: texts.id(&admin_tier_line(Tier::Admin, dir, !admin.is_empty())),
                    admin,
                    network_line: texts.id(&network_tier_line(&tiers.isolated_by, dir)),
                    isolated: !tiers.isolated_by.is_empty(),
                    network,
                    baseline_line: texts.id(&admin_tier_line(
                        Tier::Baseline,
                        dir,
                        !baseline.is_empty(),
                    )),
                    baseline,
                };
                subjects.id(&subject)
            })
            .collect()
    };
    let row_subject = subject_of(rows, Direction::Egress);
    let col_subject = subject_of(cols, Direction::Ingress);

    // Each thread computes some tables with steps numbered its own way; merged after.
    let threads = rayon::current_num_threads().clamp(1, 8);
    let parts: Vec<Part> = (0..threads)
        .into_par_iter()
        .map(|t| {
            let mut part = Part::default();
            for (i, table) in tables.iter().enumerate().skip(t).step_by(threads) {
                let others = match table.dir {
                    Direction::Egress => cols,
                    Direction::Ingress => rows,
                };
                let cells = part.table(engine, table, others, probes);
                part.done.push((i, cells));
            }
            part
        })
        .collect();
    let mut step_ids: Interner<(WalkPolicy, Direction, StepCode)> = Interner::default();
    let mut steps = Vec::new();
    let mut encoded = vec![Vec::new(); tables.len()];
    for part in parts {
        let renumber: Vec<u32> = (part.codes.items.into_iter().zip(part.texts))
            .map(|(code, (text, matched))| {
                step_ids.get(&code).unwrap_or_else(|| {
                    steps.push([texts.id(&text), u32::from(matched)]);
                    step_ids.insert(code)
                })
            })
            .collect();
        for (i, cells) in part.done {
            encoded[i] = cells
                .into_iter()
                .map(|mut row| {
                    for c in row.iter_mut().filter(|c| **c != NA) {
                        *c = renumber[*c as usize];
                    }
                    let mut s = String::new();
                    encode_row(&row, &mut s);
                    s
                })
                .collect();
        }
    }
    let not_reached = texts.id(&NOT_REACHED.to_owned());
    Walks {
        row_subject,
        col_subject,
        subjects,
        tables: encoded,
        steps,
        not_reached,
    }
}

/// One thread's share: its step codes with their texts, and the tables it computed.
#[derive(Default)]
struct Part {
    codes: Interner<(WalkPolicy, Direction, StepCode)>,
    texts: Vec<(String, bool)>,
    done: Vec<(usize, Vec<Vec<u32>>)>,
}

impl Part {
    /// `out[probe][other]`: the step of `table` for each probe and other end.
    fn table(
        &mut self,
        engine: &Engine,
        table: &Table,
        others: &[Axis],
        probes: &[Probe],
    ) -> Vec<Vec<u32>> {
        probes
            .iter()
            .map(|&probe| {
                others
                    .iter()
                    .map(|other| self.step(engine, table, other, probe))
                    .collect()
            })
            .collect()
    }

    fn step(&mut self, engine: &Engine, table: &Table, other: &Axis, probe: Probe) -> u32 {
        let analysis = Analysis::new(engine);
        let dir = table.dir;
        let flow = table.subjects.iter().find_map(|&subject| {
            let peer = if other.pods[0] == subject {
                *other.pods.get(1)?
            } else {
                other.pods[0]
            };
            let flow = match dir {
                Direction::Egress => analysis.pod_flow(subject, peer, probe),
                Direction::Ingress => analysis.pod_flow(peer, subject, probe),
            }?;
            Some((subject, flow))
        });
        let Some((subject, flow)) = flow else {
            return NA;
        };
        let code = match table.policy {
            WalkPolicy::Admin(i) => {
                StepCode::Admin(analysis.admin_step_code(i, subject, dir, &flow))
            }
            WalkPolicy::Network(i) => StepCode::Network(analysis.np_whys(i, dir, &flow)),
        };
        let key = (table.policy, dir, code);
        if let Some(i) = self.codes.get(&key) {
            return i;
        }
        self.texts.push(match table.policy {
            WalkPolicy::Admin(i) => {
                let step = analysis.admin_step(i, subject, dir, &flow);
                (
                    admin_outcome_text(&step, dir),
                    matches!(step.outcome, PolicyOutcome::Matched(_)),
                )
            }
            WalkPolicy::Network(i) => (
                network_outcome_text(&analysis.np_step(i, dir, &flow), dir),
                false,
            ),
        });
        self.codes.insert(key)
    }
}
