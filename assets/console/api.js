// The admin API client: every request the console makes goes through `request` (or
// `download`), which adds the operator's bearer token and turns error answers into
// `ApiError`s carrying the RFC 9457 problem document the server sent.

const TOKEN_KEY = "toolgate-admin-token";

/// The token lives in this tab's sessionStorage only: gone when the tab closes, never
/// written to localStorage or a cookie.
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value.trim()),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/// An answer that is not 2xx. `problem` is the parsed problem document (or a stand-in built
/// from the status when the body was not one); `needsToken` is true when the admin gate
/// refused the token itself (401, or 403 with a `WWW-Authenticate` challenge), as opposed to a
/// refusal of what the request asked.
export class ApiError extends Error {
  constructor(status, problem, headers) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.headers = headers;
    this.needsToken = status === 401 || (status === 403 && headers.has("www-authenticate"));
  }
}

/// Builds `?a=1&b=2` from an object, leaving out empty values.
export function queryString(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && String(value) !== "") q.append(key, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

function authHeaders(extra) {
  const headers = new Headers(extra || {});
  const t = token.get();
  if (t) headers.set("Authorization", `Bearer ${t}`);
  return headers;
}

async function problemOf(res) {
  const text = await res.text();
  try {
    const doc = JSON.parse(text);
    if (doc && typeof doc === "object") return doc;
  } catch {
    // not JSON: fall through
  }
  return { title: res.statusText || `HTTP ${res.status}`, status: res.status, detail: text.slice(0, 300) };
}

/// One JSON request. `body` (an object) is sent as JSON. Resolves to the parsed body (null
/// for 204); rejects with ApiError.
export async function request(method, path, { body, query, headers } = {}) {
  const init = { method, headers: authHeaders({ Accept: "application/json", ...(headers || {}) }), cache: "no-store" };
  if (body !== undefined) {
    init.headers.set("Content-Type", "application/json");
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path + queryString(query), init);
  if (!res.ok) throw new ApiError(res.status, await problemOf(res), res.headers);
  if (res.status === 204) return null;
  return res.json();
}

export const get = (path, query) => request("GET", path, { query });
export const post = (path, body) => request("POST", path, { body });

/// A POST whose answer may be an event stream (`Accept: text/event-stream`): `onEvent(name,
/// data)` gets each event's name and parsed JSON data as it arrives, and the promise resolves
/// when the stream ends (to null), or to the parsed body of a plain JSON answer. Rejects with
/// an ApiError for a refusal; aborting `signal` closes the stream (the server stops the work).
export async function postStream(path, body, { signal, onEvent }) {
  const headers = authHeaders({ Accept: "text/event-stream, application/json", "Content-Type": "application/json" });
  const res = await fetch(path, { method: "POST", headers, body: JSON.stringify(body), cache: "no-store", signal });
  if (!res.ok) throw new ApiError(res.status, await problemOf(res), res.headers);
  if (!(res.headers.get("content-type") || "").startsWith("text/event-stream")) return res.json();
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return null;
    buffer += value;
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const event = sseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) onEvent(event.name, event.data);
    }
  }
}

/// One block of an event stream: its name and JSON data (null for a keep-alive comment).
function sseEvent(block) {
  let name = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).replace(/^ /, "");
  }
  return data ? { name, data: JSON.parse(data) } : null;
}

/// Fetches a download with the token (a plain link cannot carry it) and hands it to the
/// browser under the file name the server chose (Content-Disposition). Resolves to the name.
export async function download(path, query) {
  const res = await fetch(path + queryString(query), { headers: authHeaders(), cache: "no-store" });
  if (!res.ok) throw new ApiError(res.status, await problemOf(res), res.headers);
  const disposition = res.headers.get("content-disposition") || "";
  const match = /filename="([^"]+)"/.exec(disposition);
  const name = match ? match[1] : "download";
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  // Give the browser time to start the download before the URL goes.
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  return { name, bytes: blob.size };
}

/// The page's boot information: whether a token is needed, and for which scope. Served
/// without a token (it holds no data).
export async function boot() {
  const res = await fetch("/admin/console/boot.json", { cache: "no-store" });
  if (!res.ok) throw new ApiError(res.status, await problemOf(res), res.headers);
  return res.json();
}

/// What the token says about itself, for display only (the server verifies it; this does not):
/// the subject and expiry of a JWT, or nothing for an opaque token.
export function describeToken(t) {
  const parts = (t || "").split(".");
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"));
    const claims = JSON.parse(json);
    return { subject: claims.sub, expires: claims.exp ? new Date(claims.exp * 1000) : null, scope: claims.scope || claims.scp };
  } catch {
    return null;
  }
}
