//! `toolgate audit query|export`: records as JSON lines or CSV.

use std::io::Write;

use super::db::{AuditFilter, for_each};
use super::record::AuditRecord;
use crate::store::Store;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Csv,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "jsonl" => Ok(Self::Jsonl),
            "csv" => Ok(Self::Csv),
            other => Err(format!("unknown format \"{other}\"; jsonl or csv")),
        }
    }
}

const CSV_HEADER: [&str; 19] = [
    "id",
    "time",
    "request_id",
    "session_id",
    "issuer",
    "subject",
    "client_id",
    "client_ip",
    "kind",
    "tool",
    "args_sha256",
    "arguments",
    "outcome",
    "detail",
    "duration_ms",
    "result_bytes",
    "replica_id",
    "trace_id",
    "server",
];

/// Streams every matching record to `out`; returns how many were written.
pub async fn export(store: &Store, filter: &AuditFilter, format: ExportFormat, out: impl Write) -> anyhow::Result<u64> {
    let mut n = 0u64;
    match format {
        ExportFormat::Jsonl => {
            let mut out = std::io::BufWriter::new(out);
            for_each(store, filter, |r| {
                serde_json::to_writer(&mut out, &r).map_err(std::io::Error::other)?;
                n += 1;
                out.write_all(b"\n")
            })
            .await?;
            out.flush()?;
        }
        ExportFormat::Csv => {
            let mut csv = csv::Writer::from_writer(out);
            csv.write_record(CSV_HEADER)?;
            for_each(store, filter, |r| {
                n += 1;
                csv.write_record(csv_row(&r)).map_err(std::io::Error::other)
            })
            .await?;
            csv.flush()?;
        }
    }
    Ok(n)
}

/// One record as CSV cells, each safe to open in a spreadsheet (several hold text from
/// clients and upstreams: arguments, errors, names).
fn csv_row(r: &AuditRecord) -> [String; 19] {
    cells(r).map(crate::untrusted::text::spreadsheet_cell)
}

fn cells(r: &AuditRecord) -> [String; 19] {
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let num = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_default();
    let time = r.time.format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
    [
        r.id.to_string(),
        time,
        opt(&r.request_id),
        opt(&r.session_id),
        opt(&r.issuer),
        opt(&r.subject),
        opt(&r.client_id),
        opt(&r.client_ip),
        r.kind.to_string(),
        opt(&r.tool),
        opt(&r.args_sha256),
        r.arguments.as_ref().map(|a| a.to_string()).unwrap_or_default(),
        r.outcome.to_string(),
        opt(&r.detail),
        num(r.duration_ms),
        num(r.result_bytes),
        r.replica_id.clone(),
        opt(&r.trace_id),
        opt(&r.server),
    ]
}
