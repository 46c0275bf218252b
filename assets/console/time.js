// Times as the console shows them: always with their time zone, so a reader never wonders
// whether "10:04" is theirs, the server's or UTC. Local time (the browser's zone), written
// the same way whatever the browser's language: "2026-11-21 10:04:12 CET". The zone is the
// browser's short name for it (an abbreviation, or "GMT+2" where there is none).

const pad = (n) => String(n).padStart(2, "0");

const zoneFormat = new Intl.DateTimeFormat("en-GB", { timeZoneName: "short" });

/// The short name of the browser's zone at `d` (daylight saving changes it).
export function zoneAt(d) {
  const part = zoneFormat.formatToParts(d).find((p) => p.type === "timeZoneName");
  return part ? part.value : "UTC";
}

/// The zone now, for captions ("times in CET").
export function zoneNow() {
  return zoneAt(new Date());
}

function valid(value) {
  if (value === null || value === undefined || value === "") return null;
  const d = value instanceof Date ? value : new Date(value);
  return Number.isNaN(d.getTime()) ? null : d;
}

/// "2026-11-21 10:04:12 CET" from an RFC 3339 string, a Date or ms since the epoch.
export function fmtTime(value) {
  const d = valid(value);
  if (!d) return value ? String(value) : "–";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${fmtClock(d, true)} ${zoneAt(d)}`;
}

/// "10:04" (or "10:04:12" with `seconds`), local, without the zone: for chart axes, whose
/// caption names the zone once.
export function fmtClock(d, seconds = false) {
  return `${pad(d.getHours())}:${pad(d.getMinutes())}${seconds ? `:${pad(d.getSeconds())}` : ""}`;
}

/// "10:04:12 CET": a time of today, with its zone.
export function fmtTimeOfDay(value) {
  const d = valid(value);
  return d ? `${fmtClock(d, true)} ${zoneAt(d)}` : "–";
}
