//! What one import may cost. An OpenAPI document is untrusted input: a chain of `$ref`s can be
//! deeper than the stack, thousands of references to one large schema expand it thousands of
//! times (each reference is inlined), and a document can simply be made slow. The budgets
//! bound each of these with an error that names the budget and what to change, instead of a
//! crash, gigabytes of memory, or a command that never ends.
//!
//! Sizes are measured as what the converted schemas hold once inlined: JSON nodes, and bytes
//! of text (strings and keys). A value is measured *before* it is copied, with the walk
//! stopping as soon as the budget is spent, so the cost of refusing is bounded by the budget,
//! not by the size of what was referenced.

use std::time::{Duration, Instant};

use serde_json::Value;

/// Limits on one import. The defaults import GitHub's REST API (1,100 operations, 13 MB of
/// JSON) with room to spare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budgets {
    /// Deepest nesting of schemas, counting each `$ref` followed, while one schema is inlined.
    pub max_depth: usize,
    /// Most JSON nodes the schemas of one operation may expand to; beyond, the operation is
    /// skipped with the reason.
    pub operation_nodes: usize,
    /// Most bytes of text (strings and keys) the schemas of one operation may expand to.
    pub operation_bytes: usize,
    /// Most JSON nodes all imported tools together may hold; beyond, the import fails.
    pub import_nodes: usize,
    /// Most bytes of text all imported tools together may hold.
    pub import_bytes: usize,
    /// Longest the whole import may run.
    pub time: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_depth: 64,
            operation_nodes: 20_000,
            operation_bytes: 1024 * 1024,
            import_nodes: 2_000_000,
            import_bytes: 64 * 1024 * 1024,
            time: Duration::from_secs(120),
        }
    }
}

/// What to tell the operator when the whole import is over a budget.
const SPLIT: &str = "import part of the document with --include-tag or --include-operation, or split it";

impl Budgets {
    /// The error for a schema nested deeper than [`Budgets::max_depth`].
    pub(super) fn too_deep(&self) -> String {
        format!(
            "its schemas nest (or their `$ref`s chain) deeper than {} levels, the importer's depth budget; import the operation by hand",
            self.max_depth
        )
    }

    /// The error for the import running out of [`Budgets::time`].
    pub(super) fn out_of_time(&self) -> String {
        format!("the import ran longer than its time budget of {} s: {SPLIT}", self.time.as_secs_f64())
    }
}

/// The whole import's account: when it started, and what the tools kept so far hold.
#[derive(Debug)]
pub(super) struct Meter {
    pub budgets: Budgets,
    started: Instant,
    nodes: usize,
    bytes: usize,
}

impl Meter {
    pub fn new(budgets: Budgets) -> Self {
        Self { budgets, started: Instant::now(), nodes: 0, bytes: 0 }
    }

    /// `Err` once the time budget is spent.
    pub fn check_time(&self) -> Result<(), String> {
        if self.started.elapsed() >= self.budgets.time { Err(self.budgets.out_of_time()) } else { Ok(()) }
    }

    /// Charges a kept tool (its whole definition as JSON) to the import's size budgets.
    pub fn keep(&mut self, definition: &Value) -> Result<(), String> {
        let b = &self.budgets;
        let (nodes, bytes) = size(definition, b.import_nodes.saturating_sub(self.nodes), b.import_bytes.saturating_sub(self.bytes));
        self.nodes += nodes;
        self.bytes += bytes;
        if self.nodes > b.import_nodes || self.bytes > b.import_bytes {
            let (nodes, bytes) = (b.import_nodes, b.import_bytes / (1024 * 1024));
            return Err(format!(
                "the imported tools would hold more than {nodes} JSON nodes or {bytes} MiB of text once their `$ref`s are inlined (the import's expanded-size budget): {SPLIT}"
            ));
        }
        Ok(())
    }
}

/// One operation's account while its schemas are converted.
#[derive(Debug)]
pub(super) struct Spend {
    nodes: usize,
    bytes: usize,
    /// Nodes spent when the clock was last read.
    clock_at: usize,
}

/// How many nodes are converted between two readings of the clock.
const NODES_PER_CLOCK_READ: usize = 4096;

impl Spend {
    pub fn new() -> Self {
        Self { nodes: 0, bytes: 0, clock_at: 0 }
    }

    /// Spends `nodes` and `bytes`; `Err` naming the budget once either is over it, or once the
    /// import's time is up.
    pub fn spend(&mut self, meter: &Meter, nodes: usize, bytes: usize) -> Result<(), String> {
        let b = &meter.budgets;
        self.nodes = self.nodes.saturating_add(nodes);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > b.operation_nodes {
            return Err(format!(
                "the input schema has more than {} nodes once its references are inlined (the per-operation budget); import the operation by hand",
                b.operation_nodes
            ));
        }
        if self.bytes > b.operation_bytes {
            return Err(format!(
                "the input schema holds more than {} KiB of text once its references are inlined (the per-operation budget); import the operation by hand",
                b.operation_bytes / 1024
            ));
        }
        if self.nodes - self.clock_at >= NODES_PER_CLOCK_READ {
            self.clock_at = self.nodes;
            meter.check_time()?;
        }
        Ok(())
    }

    /// Spends what a copy of `value` would hold, measured before anything is copied.
    pub fn spend_copy(&mut self, meter: &Meter, value: &Value) -> Result<(), String> {
        let b = &meter.budgets;
        let (nodes, bytes) = size(value, b.operation_nodes.saturating_sub(self.nodes), b.operation_bytes.saturating_sub(self.bytes));
        self.spend(meter, nodes, bytes)
    }
}

/// The JSON nodes and bytes of text (strings and object keys) in `value`, without recursion.
/// The walk stops once either count passes its limit, so the result is then only known to be
/// over it.
pub(super) fn size(value: &Value, max_nodes: usize, max_bytes: usize) -> (usize, usize) {
    let (mut nodes, mut bytes) = (0usize, 0usize);
    let mut pending = vec![value];
    while let Some(v) = pending.pop() {
        nodes += 1;
        match v {
            Value::String(s) => bytes += s.len(),
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    bytes += key.len();
                    pending.push(item);
                }
            }
            _ => {}
        }
        if nodes > max_nodes || bytes > max_bytes {
            break;
        }
    }
    (nodes, bytes)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn size_counts_nodes_and_text_and_stops_past_the_limit() {
        let v = json!({"ab": ["cde", 1, null], "f": {}});
        assert_eq!(size(&v, 100, 100), (6, 6));
        let big = Value::Array(vec![json!(1); 1_000_000]);
        assert_eq!(size(&big, 10, 100).0, 11, "the walk stops once over the limit");
    }

    #[test]
    fn an_operation_over_its_node_budget_names_the_budget() {
        let meter = Meter::new(Budgets { operation_nodes: 3, ..Budgets::default() });
        let mut spend = Spend::new();
        let e = spend.spend_copy(&meter, &json!([1, 2, 3])).expect_err("4 nodes");
        assert!(e.contains("more than 3 nodes") && e.contains("per-operation budget"), "{e}");
    }

    #[test]
    fn the_import_fails_once_the_kept_tools_are_over_its_budget() {
        let mut meter = Meter::new(Budgets { import_nodes: 5, ..Budgets::default() });
        meter.keep(&json!([1, 2])).expect("3 nodes");
        let e = meter.keep(&json!([1, 2])).expect_err("6 nodes");
        assert!(e.contains("expanded-size budget") && e.contains("--include-tag"), "{e}");
    }

    #[test]
    fn a_spent_time_budget_is_named() {
        let meter = Meter::new(Budgets { time: Duration::ZERO, ..Budgets::default() });
        let e = meter.check_time().expect_err("no time");
        assert!(e.contains("time budget") && e.contains("--include-operation"), "{e}");
    }
}
