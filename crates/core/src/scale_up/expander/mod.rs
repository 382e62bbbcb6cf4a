//! Expanders: which of several scale-up options the autoscaler takes.
//!
//! When more than one node group could help the pending pods, scale-up builds one
//! [`ExpansionOption`] per group and asks an [`ExpanderChain`] (the `--expander` flag, e.g.
//! `priority,least-waste`) to pick one. Each expander in the chain is a pure filter that keeps
//! the best of the survivors of the previous one (ties kept); the chain stops as soon as one
//! option is left, and breaks any remaining tie at random with a seeded, portable RNG supplied
//! by the caller.
//!
//! What this module decides: the order of preference between options, and nothing else. It must
//! never build options (scale-up does), read the priority ConfigMap itself (the shell hands in its
//! text), read the clock, draw randomness from anywhere but the RNG it is given, or turn a
//! non-empty set of options into an empty one: an expander that cannot score any option lets all
//! of them through and says so in a warning.

mod least_nodes;
mod least_waste;
mod most_pods;
mod price;
mod priority;
mod random;
mod unit_price;

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use autoscaler_model::NodeGroupId;
use autoscaler_model::Resources;

pub use least_nodes::LeastNodes;
pub use least_waste::LeastWaste;
pub use most_pods::MostPods;
pub use price::Price;
pub use priority::{Priority, PriorityConfig, PrioritySetting};
pub use random::Random;
pub use unit_price::UnitPrice;

use autoscaler_model::{PRIORITY_CONFIG_KEY, PRIORITY_CONFIG_MAP_NAME};

/// One way to scale up: grow `group` by `node_count` nodes, which would let `pods` schedule.
///
/// Plain data so that scale-up can build it from the estimator's result without the expanders
/// knowing about snapshots or templates.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpansionOption {
    /// The node group to grow.
    pub group: NodeGroupId,
    /// How many nodes to add to it.
    pub node_count: usize,
    /// Indices (into the caller's list of pending pods) of the pods this option schedules.
    pub pods: Vec<usize>,
    /// Sum of the requests of those pods.
    pub pods_requests: Resources,
    /// Allocatable of one new node of the group (upstream's least-waste reads the template
    /// node's capacity; the caller chooses which vector to pass).
    pub node_allocatable: Resources,
    /// DRA GPUs of one new node (its template's devices with `type: gpu`, every driver), which
    /// its allocatable does not list.
    pub node_dra_gpus: i64,
    /// DRA GPUs the pods' claims ask, as the new node's devices would serve them (a claim
    /// several pods share counts once); 0 for pods without claims.
    pub pods_dra_gpus: i64,
    /// Price of one new node per hour, if the provider knows it.
    pub node_price_per_hour: Option<f64>,
}

/// The expanders this crate implements, by their `--expander` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExpanderName {
    /// `random`: no preference; the chain's final tie-break decides.
    Random,
    /// `most-pods`: the options that schedule the most pods.
    MostPods,
    /// `least-waste`: the options leaving the smallest idle CPU + memory fraction (the default).
    LeastWaste,
    /// `least-nodes`: the options adding the fewest nodes.
    LeastNodes,
    /// `price`: the options with the lowest node cost relative to the pods' requests, weighted
    /// by how far the node is from the size the cluster's size calls for (upstream's model).
    Price,
    /// `priority`: the options whose group matches the highest user-given priority.
    Priority,
    /// `unit-price` (ours, not upstream's): the options whose node sells the pods' binding
    /// resource at the lowest price per unit.
    UnitPrice,
}

impl ExpanderName {
    /// Every expander, in a fixed order.
    pub const ALL: [ExpanderName; 7] = [
        ExpanderName::Random,
        ExpanderName::MostPods,
        ExpanderName::LeastWaste,
        ExpanderName::LeastNodes,
        ExpanderName::Price,
        ExpanderName::Priority,
        ExpanderName::UnitPrice,
    ];

    /// The flag name (`least-waste`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ExpanderName::Random => "random",
            ExpanderName::MostPods => "most-pods",
            ExpanderName::LeastWaste => "least-waste",
            ExpanderName::LeastNodes => "least-nodes",
            ExpanderName::Price => "price",
            ExpanderName::Priority => "priority",
            ExpanderName::UnitPrice => "unit-price",
        }
    }
}

impl fmt::Display for ExpanderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExpanderName {
    type Err = ExpanderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExpanderName::ALL
            .into_iter()
            .find(|n| n.as_str() == s)
            .ok_or_else(|| ExpanderError::UnknownExpander { name: s.to_owned() })
    }
}

/// Why an expander list or a priority configuration was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExpanderError {
    /// The expander list names nothing.
    #[error("no expander given: the expander list {list:?} is empty")]
    EmptyList {
        /// The list as given.
        list: String,
    },
    /// A name in the list is not an expander this crate implements.
    #[error(
        "unknown expander {name:?}: expected one of random, most-pods, least-waste, least-nodes, price, priority, unit-price"
    )]
    UnknownExpander {
        /// The offending name.
        name: String,
    },
    /// The same expander appears twice (upstream forbids it).
    #[error("expander {name:?} is given more than once; each expander may appear only once")]
    DuplicateExpander {
        /// The repeated name.
        name: String,
    },
    /// An expander follows `random`, which always settles on one option, so it would never run
    /// (upstream rejects this too).
    #[error(
        "expander {name:?} comes after \"random\", which always leaves one option, so it would never be used"
    )]
    AfterRandom {
        /// The expander that follows `random`.
        name: String,
    },
    /// The priority configuration text is empty.
    #[error(
        "the priority expander configuration (key `priorities` of ConfigMap `cluster-autoscaler-priority-expander`) is empty"
    )]
    PriorityConfigEmpty,
    /// The priority configuration is not a YAML mapping from integers to lists of strings.
    #[error(
        "the priority expander configuration is not a YAML mapping from integer priorities to lists of regular expressions: {message}"
    )]
    PriorityConfigYaml {
        /// The YAML parser's message.
        message: String,
    },
    /// A regular expression of the priority configuration does not compile.
    #[error("priority {priority}: regular expression {pattern:?} does not compile: {message}")]
    PriorityRegex {
        /// The priority the expression is listed under.
        priority: i64,
        /// The expression.
        pattern: String,
        /// The regex compiler's message.
        message: String,
    },
}

/// Something an expander noticed and the operator should hear about (logged, or turned into an
/// event on the priority ConfigMap). Never fatal: the choice still happens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpanderWarning {
    /// `priority` ran without a configuration and let every option through.
    PriorityConfigMissing,
    /// `priority` ran with a configuration that could not be used and let every option through.
    PriorityConfigInvalid {
        /// What is wrong with it.
        error: ExpanderError,
    },
    /// `priority` dropped an option whose group matches no expression of the configuration.
    PriorityGroupNotMatched {
        /// The group.
        group: NodeGroupId,
    },
    /// `priority` found no option whose group matches any expression and let every option
    /// through.
    PriorityNoGroupMatched,
    /// `price` dropped an option whose group has no usable price (unknown, negative or not
    /// finite) while other options had one.
    PriceUnknown {
        /// The group.
        group: NodeGroupId,
    },
    /// `price` found no option with a usable price and let every option through.
    NoPrices,
    /// An expander could not score an option (e.g. zero nodes, or a node with no CPU or memory)
    /// and dropped it while other options could be scored.
    OptionNotScorable {
        /// The expander.
        expander: ExpanderName,
        /// The group of the option.
        group: NodeGroupId,
        /// Why.
        reason: &'static str,
    },
    /// An expander could score none of the options and let every option through.
    NothingScorable {
        /// The expander.
        expander: ExpanderName,
    },
}

impl fmt::Display for ExpanderWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpanderWarning::PriorityConfigMissing => write!(
                f,
                "priority expander: no configuration (ConfigMap {PRIORITY_CONFIG_MAP_NAME}, key {PRIORITY_CONFIG_KEY}); every option kept"
            ),
            ExpanderWarning::PriorityConfigInvalid { error } => write!(
                f,
                "priority expander: configuration ignored ({error}); every option kept"
            ),
            ExpanderWarning::PriorityGroupNotMatched { group } => write!(
                f,
                "priority expander: node group {group} matches no expression of the configuration and is not used"
            ),
            ExpanderWarning::PriorityNoGroupMatched => write!(
                f,
                "priority expander: no option's node group matches the configuration; every option kept"
            ),
            ExpanderWarning::PriceUnknown { group } => write!(
                f,
                "price expander: node group {group} has no usable price and is not used"
            ),
            ExpanderWarning::NoPrices => write!(
                f,
                "price expander: no option has a usable price; every option kept"
            ),
            ExpanderWarning::OptionNotScorable {
                expander,
                group,
                reason,
            } => write!(
                f,
                "{expander} expander: option for node group {group} cannot be scored ({reason}) and is not used"
            ),
            ExpanderWarning::NothingScorable { expander } => write!(
                f,
                "{expander} expander: no option can be scored; every option kept"
            ),
        }
    }
}

/// One expansion strategy, as a pure filter over options.
pub trait Expander {
    /// Which expander this is.
    fn name(&self) -> ExpanderName;

    /// The best of `candidates` (indices into `options`), ties kept, in the order of
    /// `candidates`. Never empty when `candidates` is not: an expander that cannot decide lets
    /// the candidates through and pushes a warning saying why.
    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize>;

    /// The indices of the best options among all of `options`, ties kept, warnings dropped.
    fn best(&self, options: &[ExpansionOption]) -> Vec<usize> {
        let all: Vec<usize> = (0..options.len()).collect();
        self.filter(options, &all, &mut Vec::new())
    }
}

/// Keeps the candidates with the smallest key (ties kept, order preserved). Candidates whose key
/// is `Err(reason)` are dropped with a warning, unless no candidate has a key: then all survive
/// with a [`ExpanderWarning::NothingScorable`] warning.
pub(crate) fn keep_min<K: PartialOrd>(
    expander: ExpanderName,
    options: &[ExpansionOption],
    candidates: &[usize],
    warnings: &mut Vec<ExpanderWarning>,
    key: impl Fn(&ExpansionOption) -> Result<K, &'static str>,
) -> Vec<usize> {
    let mut best: Option<K> = None;
    let mut kept = Vec::new();
    let mut unscorable = Vec::new();
    for &i in candidates {
        let Some(option) = options.get(i) else {
            continue;
        };
        match key(option) {
            Err(reason) => unscorable.push(ExpanderWarning::OptionNotScorable {
                expander,
                group: option.group.clone(),
                reason,
            }),
            Ok(k) if k.partial_cmp(&k).is_none() => {
                unscorable.push(ExpanderWarning::OptionNotScorable {
                    expander,
                    group: option.group.clone(),
                    reason: "its score is not a number",
                })
            }
            Ok(k) => match best.as_ref().map(|b| k.partial_cmp(b)) {
                None | Some(Some(std::cmp::Ordering::Less)) => {
                    best = Some(k);
                    kept.clear();
                    kept.push(i);
                }
                Some(Some(std::cmp::Ordering::Equal)) => kept.push(i),
                Some(_) => {}
            },
        }
    }
    if kept.is_empty() {
        if !candidates.is_empty() {
            warnings.push(ExpanderWarning::NothingScorable { expander });
        }
        return candidates.to_vec();
    }
    warnings.extend(unscorable);
    kept
}

/// What one expander of the chain left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainStep {
    /// The expander.
    pub expander: ExpanderName,
    /// The options (indices) that survived it.
    pub survivors: Vec<usize>,
}

/// What the expanders may know about the cluster besides the options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpanderContext {
    /// Nodes in the cluster, upcoming ones included (`price` sizes its preferred node by it;
    /// `None`: unknown).
    pub cluster_nodes: Option<usize>,
}

/// The chain's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Index of the chosen option.
    pub index: usize,
    /// Warnings raised by the expanders that ran.
    pub warnings: Vec<ExpanderWarning>,
    /// What each expander that ran left, in chain order (the chain stops once one is left).
    pub steps: Vec<ChainStep>,
    /// How many options the final random tie-break chose among (1: no draw was made).
    pub tie_break_among: usize,
}

/// An ordered list of expanders (the `--expander` flag) plus the priority configuration the
/// `priority` expander reads.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpanderChain {
    expanders: Vec<ExpanderName>,
    priority: PrioritySetting,
}

impl Default for ExpanderChain {
    /// `least-waste`, upstream's default, with no priority configuration.
    fn default() -> Self {
        ExpanderChain {
            expanders: vec![ExpanderName::LeastWaste],
            priority: PrioritySetting::Missing,
        }
    }
}

impl ExpanderChain {
    /// Parses a comma-separated list of expander names (`priority,least-waste`). Spaces around
    /// names are ignored. Fails on an empty list or an empty name, an unknown name, a name given
    /// twice, or any name after `random` (upstream rejects the last two as well).
    pub fn parse(text: &str) -> Result<ExpanderChain, ExpanderError> {
        if text.trim().is_empty() {
            return Err(ExpanderError::EmptyList {
                list: text.to_owned(),
            });
        }
        let names = text
            .split(',')
            .map(|n| n.trim().parse::<ExpanderName>())
            .collect::<Result<Vec<_>, _>>()?;
        ExpanderChain::new(names)
    }

    /// A chain of `names`, validated as [`ExpanderChain::parse`] does.
    pub fn new(names: Vec<ExpanderName>) -> Result<ExpanderChain, ExpanderError> {
        if names.is_empty() {
            return Err(ExpanderError::EmptyList {
                list: String::new(),
            });
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(ExpanderError::DuplicateExpander {
                    name: name.as_str().to_owned(),
                });
            }
            if i > 0 && names[i - 1] == ExpanderName::Random {
                return Err(ExpanderError::AfterRandom {
                    name: name.as_str().to_owned(),
                });
            }
        }
        Ok(ExpanderChain {
            expanders: names,
            priority: PrioritySetting::Missing,
        })
    }

    /// The expanders, in order.
    pub fn expanders(&self) -> &[ExpanderName] {
        &self.expanders
    }

    /// The priority configuration in use.
    pub fn priority_setting(&self) -> &PrioritySetting {
        &self.priority
    }

    /// Sets the priority configuration from the raw text of the ConfigMap's `priorities` key
    /// (`None`: the ConfigMap or the key is absent). A bad text is kept as
    /// [`PrioritySetting::Invalid`]: `priority` then lets everything through with a warning.
    pub fn set_priority_text(&mut self, text: Option<&str>) {
        self.priority = PrioritySetting::from_text(text);
    }

    /// Sets an already parsed priority configuration.
    pub fn set_priority_config(&mut self, config: PriorityConfig) {
        self.priority = PrioritySetting::Loaded(config);
    }

    /// Builder form of [`ExpanderChain::set_priority_text`].
    pub fn with_priority_text(mut self, text: Option<&str>) -> ExpanderChain {
        self.set_priority_text(text);
        self
    }

    /// Builder form of [`ExpanderChain::set_priority_config`].
    pub fn with_priority_config(mut self, config: PriorityConfig) -> ExpanderChain {
        self.set_priority_config(config);
        self
    }

    /// [`ExpanderChain::choose_in`] without knowing the cluster's size.
    pub fn choose(&self, options: &[ExpansionOption], rng: &mut ChaCha8Rng) -> Option<Choice> {
        self.choose_in(options, &ExpanderContext::default(), rng)
    }

    /// Chooses one of `options`: each expander filters the survivors of the previous one, the
    /// chain stops as soon as one is left, and a remaining tie is broken uniformly at random with
    /// `rng` (drawn from only when more than one option is left). `None` iff `options` is empty.
    pub fn choose_in(
        &self,
        options: &[ExpansionOption],
        context: &ExpanderContext,
        rng: &mut ChaCha8Rng,
    ) -> Option<Choice> {
        if options.is_empty() {
            return None;
        }
        let mut survivors: Vec<usize> = (0..options.len()).collect();
        let mut warnings = Vec::new();
        let mut steps = Vec::new();
        for &name in &self.expanders {
            if survivors.len() <= 1 {
                break;
            }
            let next = self.run(name, options, context, &survivors, &mut warnings);
            // An expander never empties the set; keep the previous survivors if one ever did.
            if !next.is_empty() {
                survivors = next;
            }
            steps.push(ChainStep {
                expander: name,
                survivors: survivors.clone(),
            });
        }
        let tie_break_among = survivors.len();
        let pick = if tie_break_among > 1 {
            rng.random_range(0..tie_break_among)
        } else {
            0
        };
        let index = *survivors.get(pick)?;
        Some(Choice {
            index,
            warnings,
            steps,
            tie_break_among,
        })
    }

    fn run(
        &self,
        name: ExpanderName,
        options: &[ExpansionOption],
        context: &ExpanderContext,
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        match name {
            ExpanderName::Random => Random.filter(options, candidates, warnings),
            ExpanderName::MostPods => MostPods.filter(options, candidates, warnings),
            ExpanderName::LeastWaste => LeastWaste.filter(options, candidates, warnings),
            ExpanderName::LeastNodes => LeastNodes.filter(options, candidates, warnings),
            ExpanderName::Price => Price {
                cluster_nodes: context.cluster_nodes,
            }
            .filter(options, candidates, warnings),
            ExpanderName::Priority => {
                Priority::new(&self.priority).filter(options, candidates, warnings)
            }
            ExpanderName::UnitPrice => UnitPrice.filter(options, candidates, warnings),
        }
    }
}

impl FromStr for ExpanderChain {
    type Err = ExpanderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExpanderChain::parse(s)
    }
}

impl fmt::Display for ExpanderChain {
    /// The comma-separated list, as [`ExpanderChain::parse`] reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.expanders.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(name.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::SeedableRng;

    /// One GiB in bytes.
    pub(crate) const GIB: i64 = 1024 * 1024 * 1024;

    /// An option for `group` adding `nodes` nodes of `cpu_m` millicores and `mem_gib` GiB that
    /// schedules `pods` pods requesting nothing, with no price.
    pub(crate) fn opt(
        group: &str,
        nodes: usize,
        pods: usize,
        cpu_m: i64,
        mem_gib: i64,
    ) -> ExpansionOption {
        ExpansionOption {
            group: group.into(),
            node_count: nodes,
            pods: (0..pods).collect(),
            pods_requests: Resources::ZERO,
            node_allocatable: Resources {
                cpu: cpu_m,
                memory: mem_gib.saturating_mul(GIB),
                pods: 110,
                ..Resources::ZERO
            },
            node_dra_gpus: 0,
            pods_dra_gpus: 0,
            node_price_per_hour: None,
        }
    }

    /// `o` with its pods requesting `cpu_m` millicores and `mem_gib` GiB in total.
    pub(crate) fn with_req(mut o: ExpansionOption, cpu_m: i64, mem_gib: i64) -> ExpansionOption {
        o.pods_requests.cpu = cpu_m;
        o.pods_requests.memory = mem_gib * GIB;
        o.pods_requests.pods = o.pods.len() as i64;
        o
    }

    /// `o` priced at `price` per node-hour.
    pub(crate) fn with_price(mut o: ExpansionOption, price: f64) -> ExpansionOption {
        o.node_price_per_hour = Some(price);
        o
    }

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// Four options on which most-pods, least-waste, least-nodes and price each pick a
    /// different one.
    fn contest() -> Vec<ExpansionOption> {
        vec![
            // most-pods: 10 pods, on 5 nodes, half idle, pricey.
            with_price(with_req(opt("many-pods", 5, 10, 4000, 16), 10_000, 40), 1.0),
            // least-waste: 2 pods filling 2 nodes exactly, dear per resource.
            with_price(with_req(opt("snug", 2, 2, 2000, 8), 4000, 16), 3.0),
            // least-nodes: 1 huge node, mostly idle, costly.
            with_price(with_req(opt("one-big", 1, 3, 64_000, 256), 6000, 24), 20.0),
            // price: 3 cheap nodes, fairly used.
            with_price(with_req(opt("cheap", 3, 4, 4000, 16), 8000, 32), 0.1),
        ]
    }

    #[test]
    fn each_expander_picks_what_its_definition_says() {
        let o = contest();
        assert_eq!(MostPods.best(&o), vec![0]);
        assert_eq!(LeastWaste.best(&o), vec![1]);
        assert_eq!(LeastNodes.best(&o), vec![2]);
        assert_eq!(Price::default().best(&o), vec![3]);
        assert_eq!(Random.best(&o), vec![0, 1, 2, 3]);
        for (text, want) in [
            ("most-pods", 0),
            ("least-waste", 1),
            ("least-nodes", 2),
            ("price", 3),
        ] {
            let chain = ExpanderChain::parse(text).expect("valid");
            let c = chain.choose(&o, &mut rng(7)).expect("non-empty");
            assert_eq!(c.index, want, "{text}");
            assert_eq!(c.tie_break_among, 1);
            assert!(c.warnings.is_empty(), "{text}: {:?}", c.warnings);
        }
    }

    #[test]
    fn keep_min_drops_nan_scores() {
        let options = vec![
            opt("a", 1, 1, 1, 1),
            opt("b", 1, 1, 1, 1),
            opt("c", 1, 1, 1, 1),
        ];
        let mut w = Vec::new();
        let kept = keep_min(ExpanderName::Price, &options, &[0, 1, 2], &mut w, |o| {
            Ok(if o.group.as_str() == "a" {
                f64::NAN
            } else {
                1.0
            })
        });
        assert_eq!(kept, vec![1, 2]);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn default_chain_is_least_waste() {
        let chain = ExpanderChain::default();
        assert_eq!(chain.expanders(), &[ExpanderName::LeastWaste]);
        assert_eq!(chain.to_string(), "least-waste");
        assert_eq!(
            chain.choose(&contest(), &mut rng(1)).map(|c| c.index),
            Some(1)
        );
    }

    #[test]
    fn priority_then_least_waste_narrows_in_order() {
        let options = vec![
            // Highest priority, wasteful.
            with_req(opt("spot-a", 1, 1, 4000, 16), 1000, 4),
            // Lower priority, perfect fit: priority must drop it before least-waste sees it.
            with_req(opt("ondemand", 1, 1, 4000, 16), 4000, 16),
            // Highest priority, snug.
            with_req(opt("spot-b", 1, 1, 4000, 16), 3000, 12),
            // Matches nothing: dropped.
            with_req(opt("gpu", 1, 1, 4000, 16), 4000, 16),
        ];
        let chain = ExpanderChain::parse("priority,least-waste")
            .expect("valid")
            .with_priority_text(Some("100:\n  - ^spot-\n1:\n  - ondemand\n"));
        let c = chain.choose(&options, &mut rng(3)).expect("non-empty");
        assert_eq!(c.index, 2);
        assert_eq!(
            c.steps,
            vec![
                ChainStep {
                    expander: ExpanderName::Priority,
                    survivors: vec![0, 2]
                },
                ChainStep {
                    expander: ExpanderName::LeastWaste,
                    survivors: vec![2]
                },
            ]
        );
        assert_eq!(
            c.warnings,
            vec![ExpanderWarning::PriorityGroupNotMatched {
                group: "gpu".into()
            }]
        );
    }

    #[test]
    fn chain_stops_once_one_option_is_left() {
        let options = vec![opt("a", 1, 1, 4000, 8), opt("b", 1, 1, 4000, 8)];
        // Priority keeps only "a"; price would warn about missing prices if it ran.
        let chain = ExpanderChain::parse("priority,price")
            .expect("valid")
            .with_priority_text(Some("1: ['^a$', '^zzz$']"));
        let c = chain.choose(&options, &mut rng(0)).expect("non-empty");
        assert_eq!(c.index, 0);
        assert_eq!(c.steps.len(), 1);
        assert_eq!(
            c.warnings,
            vec![ExpanderWarning::PriorityGroupNotMatched { group: "b".into() }]
        );
    }

    #[test]
    fn malformed_or_missing_priority_config_lets_everything_through() {
        let options = vec![
            with_req(opt("a", 1, 1, 4000, 16), 1000, 4),
            with_req(opt("b", 1, 1, 4000, 16), 4000, 16),
        ];
        for text in [None, Some("10: [\"(\"]"), Some("not: [a: mapping")] {
            let chain = ExpanderChain::parse("priority,least-waste")
                .expect("valid")
                .with_priority_text(text);
            let c = chain.choose(&options, &mut rng(5)).expect("non-empty");
            // least-waste decides alone.
            assert_eq!(c.index, 1, "{text:?}");
            assert_eq!(c.steps[0].survivors, vec![0, 1]);
            assert_eq!(c.warnings.len(), 1);
            let msg = c.warnings[0].to_string();
            assert!(msg.contains("every option kept"), "{msg}");
        }
    }

    #[test]
    fn parsed_config_can_be_given_directly() {
        let config = PriorityConfig::parse("5: [b]").expect("valid");
        let chain = ExpanderChain::parse("priority")
            .expect("valid")
            .with_priority_config(config.clone());
        assert_eq!(chain.priority_setting(), &PrioritySetting::Loaded(config));
        let options = vec![opt("a", 1, 1, 1, 1), opt("b", 1, 1, 1, 1)];
        assert_eq!(
            chain.choose(&options, &mut rng(9)).map(|c| c.index),
            Some(1)
        );
    }

    #[test]
    fn tie_break_is_deterministic_per_seed_and_varies_across_seeds() {
        let options: Vec<_> = (0..8)
            .map(|i| opt(&format!("g{i}"), 1, 1, 4000, 8))
            .collect();
        let chain = ExpanderChain::parse("random").expect("valid");
        let pick = |seed| chain.choose(&options, &mut rng(seed)).map(|c| c.index);
        for seed in 0..20 {
            assert_eq!(pick(seed), pick(seed));
        }
        let distinct: std::collections::BTreeSet<_> = (0..50).filter_map(pick).collect();
        assert!(distinct.len() > 1, "{distinct:?}");
        let c = chain.choose(&options, &mut rng(0)).expect("non-empty");
        assert_eq!(c.tie_break_among, 8);
        // The same RNG advanced by one choice gives the next choice of a fresh run's sequence.
        let mut r1 = rng(11);
        let seq1: Vec<_> = (0..5)
            .filter_map(|_| chain.choose(&options, &mut r1))
            .map(|c| c.index)
            .collect();
        let mut r2 = rng(11);
        let seq2: Vec<_> = (0..5)
            .filter_map(|_| chain.choose(&options, &mut r2))
            .map(|c| c.index)
            .collect();
        assert_eq!(seq1, seq2);
    }

    #[test]
    fn tie_break_only_among_survivors_and_no_draw_for_one() {
        let options = vec![
            opt("a", 1, 3, 4000, 8),
            opt("b", 1, 1, 4000, 8),
            opt("c", 1, 3, 4000, 8),
        ];
        let chain = ExpanderChain::parse("most-pods").expect("valid");
        for seed in 0..30 {
            let c = chain.choose(&options, &mut rng(seed)).expect("non-empty");
            assert!(c.index == 0 || c.index == 2);
            assert_eq!(c.tie_break_among, 2);
        }
        // A single option: the rng is untouched.
        let mut r = rng(4);
        let before = r.clone();
        assert_eq!(
            chain.choose(&options[1..2], &mut r).map(|c| c.index),
            Some(0)
        );
        assert_eq!(r, before);
        assert_eq!(chain.choose(&[], &mut r), None);
    }

    fn arb_option() -> impl proptest::strategy::Strategy<Value = ExpansionOption> {
        use proptest::prelude::*;
        (
            0usize..4,
            0usize..5,
            0usize..6,
            -1i64..9000,
            -1i64..40,
            prop::option::of(prop_oneof![Just(f64::NAN), Just(-1.0), 0.0f64..5.0]),
        )
            .prop_map(|(g, nodes, pods, cpu, mem, price)| {
                let mut o = with_req(
                    opt(&format!("g{g}"), nodes, pods, cpu, mem),
                    cpu / 2,
                    mem / 2,
                );
                o.node_price_per_hour = price;
                o
            })
    }

    proptest::proptest! {
        /// Whatever the options, chain and config: an expander returns a non-empty subset of
        /// its candidates in their order, and the chain picks a valid index deterministically.
        #[test]
        fn expanders_never_empty_and_chain_picks_valid(
            options in proptest::collection::vec(arb_option(), 0..7),
            names in proptest::sample::subsequence(ExpanderName::ALL.to_vec(), 0..=7),
            shuffle_seed in 0u64..1000,
            config in proptest::option::of(proptest::sample::select(vec!["1: ['g1', 'g2']\n2: ['^g3$']", "oops: [", "9: ['x']"])),
        ) {
            use rand::seq::SliceRandom;
            let mut names = names;
            names.shuffle(&mut rng(shuffle_seed));
            let setting = PrioritySetting::from_text(config);
            let all: Vec<usize> = (0..options.len()).collect();
            for &name in &ExpanderName::ALL {
                let mut w = Vec::new();
                let kept = match name {
                    ExpanderName::Random => Random.filter(&options, &all, &mut w),
                    ExpanderName::MostPods => MostPods.filter(&options, &all, &mut w),
                    ExpanderName::LeastWaste => LeastWaste.filter(&options, &all, &mut w),
                    ExpanderName::LeastNodes => LeastNodes.filter(&options, &all, &mut w),
                    ExpanderName::Price => Price::default().filter(&options, &all, &mut w),
                    ExpanderName::Priority => Priority::new(&setting).filter(&options, &all, &mut w),
                    ExpanderName::UnitPrice => UnitPrice.filter(&options, &all, &mut w),
                };
                proptest::prop_assert_eq!(kept.is_empty(), options.is_empty());
                proptest::prop_assert!(kept.windows(2).all(|p| p[0] < p[1]));
                proptest::prop_assert!(kept.iter().all(|i| *i < options.len()));
            }
            // Lists with something after `random` are rejected; test the valid ones.
            if let Ok(chain) = ExpanderChain::new(names) {
                let chain = chain.with_priority_text(config);
                let a = chain.choose(&options, &mut rng(shuffle_seed));
                let b = chain.choose(&options, &mut rng(shuffle_seed));
                proptest::prop_assert_eq!(&a, &b);
                match a {
                    None => proptest::prop_assert!(options.is_empty()),
                    Some(c) => {
                        proptest::prop_assert!(c.index < options.len());
                        if let Some(last) = c.steps.last() {
                            proptest::prop_assert!(last.survivors.contains(&c.index));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parse_accepts_known_lists() {
        let chain =
            ExpanderChain::parse(" priority , most-pods,least-nodes,price,least-waste,random")
                .expect("valid");
        assert_eq!(
            chain.to_string(),
            "priority,most-pods,least-nodes,price,least-waste,random"
        );
        assert_eq!(chain.to_string().parse::<ExpanderChain>(), Ok(chain));
    }

    #[test]
    fn parse_errors_name_the_text() {
        assert_eq!(
            ExpanderChain::parse(""),
            Err(ExpanderError::EmptyList {
                list: String::new()
            })
        );
        assert_eq!(
            ExpanderChain::parse("least-waste,fastest"),
            Err(ExpanderError::UnknownExpander {
                name: "fastest".into()
            })
        );
        assert_eq!(
            ExpanderChain::parse("priority,"),
            Err(ExpanderError::UnknownExpander {
                name: String::new()
            })
        );
        assert_eq!(
            ExpanderChain::parse("grpc"),
            Err(ExpanderError::UnknownExpander {
                name: "grpc".into()
            })
        );
        assert_eq!(
            ExpanderChain::parse("price,least-waste,price"),
            Err(ExpanderError::DuplicateExpander {
                name: "price".into()
            })
        );
        assert_eq!(
            ExpanderChain::parse("random,least-waste"),
            Err(ExpanderError::AfterRandom {
                name: "least-waste".into()
            })
        );
        let msg = ExpanderChain::parse("Least-Waste")
            .expect_err("case matters")
            .to_string();
        assert!(msg.contains("\"Least-Waste\""), "{msg}");
        assert_eq!(
            ExpanderChain::new(vec![]),
            Err(ExpanderError::EmptyList {
                list: String::new()
            })
        );
    }
}
