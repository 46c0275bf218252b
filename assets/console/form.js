// A form generated from a tool's `inputSchema` (JSON Schema): one field per top-level
// property. Strings, numbers, integers and booleans get inputs, `enum`s a select, required
// properties a mark; objects, arrays and anything more elaborate (anyOf, no type) a JSON
// textarea. "Edit as JSON" switches to one textarea for the whole arguments object, which is
// also where a schema without properties starts. The server validates the arguments again
// against the schema: this form only helps to write them.

import { h } from "./dom.js";

/// The first type that is not "null" (`["string", "null"]` is an optional string).
function typeOf(prop) {
  const t = prop.type;
  if (Array.isArray(t)) return t.find((x) => x !== "null") || "null";
  return t || (prop.enum ? "enum" : undefined);
}

/// One field: its element, and `read()` → `{set: false}` | `{set: true, value}` | `{error}`.
function field(name, prop, required, index) {
  const id = `arg-${index}`;
  const type = typeOf(prop);
  const label = h("label", { for: id }, name, required ? h("span", { class: "required", title: "required" }, " *") : null, h("span", { class: "type muted" }, ` ${prop.enum ? "enum" : type || "any"}`));
  const help = prop.description ? h("div", { class: "help muted" }, prop.description) : null;
  let input;
  let read;

  if (Array.isArray(prop.enum)) {
    // Options carry the index of the enum value, so any JSON value can be chosen.
    const options = prop.enum.map((v, i) => h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v)));
    input = h("select", { id, name }, required ? null : h("option", { value: "" }, "(not set)"), options);
    if (prop.default !== undefined) {
      const i = prop.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(prop.default));
      if (i >= 0) input.value = String(i);
    }
    read = () => (input.value === "" ? { set: false } : { set: true, value: prop.enum[Number(input.value)] });
  } else if (type === "boolean") {
    input = h("select", { id, name }, required ? null : h("option", { value: "" }, "(not set)"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    if (typeof prop.default === "boolean") input.value = String(prop.default);
    read = () => (input.value === "" ? { set: false } : { set: true, value: input.value === "true" });
  } else if (type === "integer" || type === "number") {
    input = h("input", { id, name, type: "number", step: type === "integer" ? "1" : "any", min: prop.minimum, max: prop.maximum });
    if (typeof prop.default === "number") input.value = String(prop.default);
    read = () => {
      if (input.value.trim() === "") return { set: false };
      const n = Number(input.value);
      if (!Number.isFinite(n)) return { error: `${name}: not a number` };
      if (type === "integer" && !Number.isInteger(n)) return { error: `${name}: must be a whole number` };
      return { set: true, value: n };
    };
  } else if (type === "string") {
    const long = (prop.maxLength || 0) > 200 || prop.format === "textarea";
    input = long ? h("textarea", { id, name, rows: 4 }) : h("input", { id, name, type: "text", maxlength: prop.maxLength, placeholder: prop.format || null });
    if (typeof prop.default === "string") input.value = prop.default;
    // An empty field is left out (a required one is then reported missing); send "" from the
    // JSON editor when an empty string is really meant.
    read = () => (input.value === "" ? { set: false } : { set: true, value: input.value });
  } else {
    // object, array, or a schema this form does not break down: JSON.
    input = h("textarea", { id, name, rows: 4, class: "mono", placeholder: type === "array" ? "[ ]" : type === "object" ? "{ }" : "JSON value" });
    if (prop.default !== undefined) input.value = JSON.stringify(prop.default, null, 2);
    read = () => {
      if (input.value.trim() === "") return { set: false };
      try {
        return { set: true, value: JSON.parse(input.value) };
      } catch (e) {
        return { error: `${name}: not valid JSON (${e.message})` };
      }
    };
  }
  const write = (value) => {
    if (Array.isArray(prop.enum)) {
      const i = prop.enum.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
      input.value = i >= 0 ? String(i) : "";
    } else if (type === "boolean") input.value = value === undefined ? "" : String(value);
    else if (type === "integer" || type === "number" || type === "string") input.value = value === undefined ? "" : String(value);
    else input.value = value === undefined ? "" : JSON.stringify(value, null, 2);
  };
  return { name, required, element: h("div", { class: "field" }, label, input, help), read, write };
}

/// The form for `schema`. Returns `{element, read}`: `read()` gives `{arguments}` or
/// `{errors: [...]}`.
export function schemaForm(schema) {
  const properties = (schema && typeof schema.properties === "object" && schema.properties) || {};
  const required = new Set(Array.isArray(schema && schema.required) ? schema.required : []);
  const fields = Object.entries(properties).map(([name, prop], i) => field(name, prop || {}, required.has(name), i));

  const raw = h("textarea", { id: "arg-json", class: "mono", rows: 10, spellcheck: "false", "aria-label": "Arguments as JSON" });
  const rawBox = h("div", { class: "field" }, h("label", { for: "arg-json" }, "Arguments (JSON object)"), raw);
  const fieldBox = h("div", { class: "fields" }, fields.map((f) => f.element));
  // Without properties there is nothing to break down: JSON from the start.
  let rawMode = fields.length === 0;

  const readFields = () => {
    const args = {};
    const errors = [];
    for (const f of fields) {
      const r = f.read();
      if (r.error) errors.push(r.error);
      else if (r.set) args[f.name] = r.value;
      else if (f.required) errors.push(`${f.name} is required`);
    }
    return { args, errors };
  };
  const readRaw = () => {
    const text = raw.value.trim() || "{}";
    try {
      const value = JSON.parse(text);
      if (value === null || typeof value !== "object" || Array.isArray(value)) return { errors: ["the arguments must be a JSON object"] };
      return { arguments: value };
    } catch (e) {
      return { errors: [`the arguments are not valid JSON (${e.message})`] };
    }
  };

  const toggle = h("button", { type: "button", class: "link", id: "arg-mode" });
  const show = () => {
    fieldBox.hidden = rawMode;
    rawBox.hidden = !rawMode;
    toggle.textContent = rawMode ? "Edit as form" : "Edit as JSON";
    toggle.hidden = fields.length === 0;
  };
  toggle.addEventListener("click", () => {
    if (!rawMode) {
      // Carry what the form holds into the JSON, so nothing typed is lost.
      raw.value = JSON.stringify(readFields().args, null, 2);
    } else {
      const r = readRaw();
      if (r.arguments) for (const f of fields) f.write(r.arguments[f.name]);
    }
    rawMode = !rawMode;
    show();
  });
  show();
  if (rawMode) raw.value = "{}";

  const read = () => {
    if (rawMode) return readRaw();
    const { args, errors } = readFields();
    return errors.length ? { errors } : { arguments: args };
  };
  return { element: h("div", { class: "schema-form" }, fieldBox, rawBox, h("div", { class: "form-tools" }, toggle)), read };
}
