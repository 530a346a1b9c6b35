//! The rules: layers bottom-up, imports only downwards, no circles.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::ModuleGraph;

/// Layers bottom-up: each entry is a module path prefix ("structs", "apiserver::storage");
/// a module belongs to the layer with the longest matching prefix.
///
/// A prefix matches the module of that path and every module below it, never a module whose
/// name merely starts with the same letters ("api" does not match "apiserver"). A module may
/// use modules of its own layer and of the layers below it. Modules in no layer (allowed with
/// [`Layers::with_unlayered`]) count as above every layer: they may use anything, and a
/// layered module that uses one imports upwards.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    layers: Vec<String>,
    unlayered: BTreeSet<String>,
}

/// The name [`Violation::Upward`] gives as the layer of a module that sits in no layer.
const NO_LAYER: &str = "(no layer: above them all)";

impl Layers {
    /// The layers, lowest first.
    pub fn bottom_up(layers: &[&str]) -> Layers {
        Layers {
            layers: layers.iter().map(|layer| String::from(*layer)).collect(),
            ..Layers::default()
        }
    }

    /// Modules that sit in no layer are allowed only if listed here (e.g. the crate root "",
    /// which is the public face and may use anything).
    pub fn with_unlayered(mut self, modules: &[&str]) -> Layers {
        self.unlayered
            .extend(modules.iter().map(|module| String::from(*module)));
        self
    }

    /// Every violation: a module using a module of a higher layer ("upward import"), a
    /// module in no layer, and every import circle between modules (strongly connected
    /// components of size > 1, at module granularity, within or across layers). Empty when
    /// the architecture holds.
    ///
    /// Modules in no layer come first, then upward imports, then circles, each sorted.
    pub fn check(&self, graph: &ModuleGraph) -> Vec<Violation> {
        let mut violations = Vec::new();
        for (module, _) in graph.dependencies() {
            if self.layer_of(module).is_none() && !self.unlayered.contains(module) {
                violations.push(Violation::Unlayered {
                    module: module.to_owned(),
                });
            }
        }
        for (from, used) in graph.dependencies() {
            let Some(from_layer) = self.layer_of(from) else {
                continue;
            };
            for to in used {
                let to_layer = self.layer_of(to);
                if to_layer.is_none_or(|to_layer| to_layer > from_layer) {
                    violations.push(Violation::Upward {
                        from: from.to_owned(),
                        from_layer: self.layers[from_layer].clone(),
                        to: to.clone(),
                        to_layer: to_layer.map_or_else(
                            || NO_LAYER.to_owned(),
                            |layer| self.layers[layer].clone(),
                        ),
                    });
                }
            }
        }
        violations.extend(
            circles(graph)
                .into_iter()
                .map(|modules| Violation::Circle { modules }),
        );
        violations
    }

    /// The index of the layer `module` belongs to: the longest prefix that matches it.
    fn layer_of(&self, module: &str) -> Option<usize> {
        self.layers
            .iter()
            .enumerate()
            .filter(|(_, prefix)| is_within(module, prefix))
            .max_by_key(|(_, prefix)| prefix.len())
            .map(|(index, _)| index)
    }
}

/// Whether `module` is the module `prefix` or one below it.
fn is_within(module: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || module
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// One broken rule, with a message that names both modules and the layers, so a test failure
/// tells the developer what to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// A module uses a module of a higher layer (or one in no layer).
    Upward {
        /// The module that imports.
        from: String,
        /// The layer of the module that imports.
        from_layer: String,
        /// The module it imports.
        to: String,
        /// The layer of the module it imports, higher than `from_layer`.
        to_layer: String,
    },
    /// A module sits in no layer and is not listed as allowed to.
    Unlayered {
        /// The module.
        module: String,
    },
    /// Modules that use each other, directly or through others.
    Circle {
        /// The modules in the circle, sorted.
        modules: Vec<String>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Upward {
                from,
                from_layer,
                to,
                to_layer,
            } => write!(
                f,
                "upward import: {} (layer {}) uses {} (layer {}, higher); move what it uses \
                 down to layer {} or below, or pass it in from above",
                Shown(from),
                Shown(from_layer),
                Shown(to),
                Shown(to_layer),
                Shown(from_layer),
            ),
            Violation::Unlayered { module } => write!(
                f,
                "module {} sits in no layer; move it into one, or list it as unlayered",
                Shown(module),
            ),
            Violation::Circle { modules } => {
                write!(f, "import circle between {} modules: ", modules.len())?;
                for (index, module) in modules.iter().enumerate() {
                    let separator = if index == 0 { "" } else { ", " };
                    write!(f, "{separator}{}", Shown(module))?;
                }
                write!(f, "; move what they share into a module below them all")
            }
        }
    }
}

/// A module or layer name as messages show it: quoted, the root by name.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            "" => f.write_str("`crate` (the root)"),
            name if name.starts_with('(') => f.write_str(name),
            name => write!(f, "`{name}`"),
        }
    }
}

/// The strongly connected components of more than one module (Tarjan's algorithm), each
/// sorted, in the order of their first modules.
fn circles(graph: &ModuleGraph) -> Vec<Vec<String>> {
    let edges: BTreeMap<&str, Vec<&str>> = graph
        .dependencies()
        .map(|(module, used)| (module, used.iter().map(String::as_str).collect()))
        .collect();
    let mut tarjan = Tarjan {
        edges: &edges,
        index: BTreeMap::new(),
        lowlink: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for module in edges.keys() {
        if !tarjan.index.contains_key(module) {
            tarjan.visit(module);
        }
    }
    let mut circles = tarjan.components;
    for circle in &mut circles {
        circle.sort();
    }
    circles.sort();
    circles
}

/// The state of Tarjan's walk: each module's visiting order and the lowest order reachable
/// from it, and the modules of the components not yet complete.
struct Tarjan<'a> {
    edges: &'a BTreeMap<&'a str, Vec<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    lowlink: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    on_stack: BTreeSet<&'a str>,
    components: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, module: &'a str) {
        let index = self.index.len();
        self.index.insert(module, index);
        self.lowlink.insert(module, index);
        self.stack.push(module);
        self.on_stack.insert(module);
        for &used in self.edges.get(module).into_iter().flatten() {
            if !self.index.contains_key(used) {
                self.visit(used);
                let low = self.lowlink[module].min(self.lowlink[used]);
                self.lowlink.insert(module, low);
            } else if self.on_stack.contains(used) {
                let low = self.lowlink[module].min(self.index[used]);
                self.lowlink.insert(module, low);
            }
        }
        if self.lowlink[module] == index {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack.remove(member);
                component.push(member.to_owned());
                if member == module {
                    break;
                }
            }
            if component.len() > 1 {
                self.components.push(component);
            }
        }
    }
}
