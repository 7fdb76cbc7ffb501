// The explorer's one door to the JSON API: the key and namespace the user chose (kept in
// sessionStorage: this tab's only, gone when it closes), requests with them, the API's JSON
// errors, and small DOM helpers that only ever set text (content from the API is never parsed
// as HTML).

const KEY = "brainstream.key";
const NAMESPACE = "brainstream.namespace";

// an earlier explorer kept the key in localStorage, for good: forget it
localStorage.removeItem(KEY);
localStorage.removeItem(NAMESPACE);

export const auth = {
  get key() { return sessionStorage.getItem(KEY) || ""; },
  set key(value) { sessionStorage.setItem(KEY, value); },
  get namespace() { return sessionStorage.getItem(NAMESPACE) || ""; },
  set namespace(value) {
    if (value) sessionStorage.setItem(NAMESPACE, value); else sessionStorage.removeItem(NAMESPACE);
  },
  namespaces: [],  // of the current key, from GET /v1/me
  operator: false,  // whether it may read the operator page
};

/** An answer the API refused: its JSON error ({code, message, field}) and HTTP status. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "http_" + status;
    this.field = error.field || null;
  }
}

/** Call the API with the chosen key (and namespace, when the key has several). */
export async function api(method, path, body) {
  const headers = {"Authorization": "Bearer " + auth.key};
  if (auth.namespace && auth.namespaces.length > 1) headers["X-Namespace"] = auth.namespace;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {method, headers,
                                      body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!response.ok) {
    throw new ApiError(response.status, (data && data.error) || {message: text});
  }
  return data;
}

/** h("a", {href: "#"}, "text", child...): an element; strings become text nodes. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** The API's error as a box naming its code and field. */
export function errorBox(err) {
  if (!(err instanceof ApiError)) return h("div", {class: "error"}, String(err));
  return h("div", {class: "error", "data-test": "error", "data-code": err.code},
           h("b", {}, err.code), err.field ? ` (${err.field})` : "", ": ", err.message);
}

// The API's snippets cut a query word to a prefix (pipeline/retrieval/snippets.py), so that
// "warehouses" finds "warehouse": highlight the same prefixes.
function stem(word) { return word.length > 5 ? word.slice(0, Math.max(4, word.length - 3)) : word; }

export function queryTerms(query) {
  const words = (query.toLowerCase().match(/[\p{L}\p{N}_]+/gu) || []).filter(w => w.length > 1);
  return [...new Set(words.map(stem))].sort((a, b) => b.length - a.length);
}

/** `text` with every occurrence of the query's terms in <mark> (text nodes only). */
export function highlight(text, terms) {
  const out = h("span", {});
  if (!terms.length) { out.append(text); return out; }
  const escaped = terms.map(t => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(${escaped.join("|")})[\\p{L}\\p{N}_]*`, "giu");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    out.append(text.slice(last, match.index), h("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  out.append(text.slice(last));
  return out;
}

/** A table of rows (arrays of cells) under `columns`. */
export function table(columns, rows, attrs) {
  return h("table", attrs || {},
           h("thead", {}, h("tr", {}, columns.map(c => h("th", {}, c)))),
           h("tbody", {}, rows.map(r => h("tr", {}, r.map(c => h("td", {}, c ?? ""))))));
}

export function objectLink(obj, className) {
  return h("a", {href: `#/object/${obj.id}`, "data-test": "object-link", "data-id": obj.id,
                 class: className}, obj.title || obj.name || obj.id);
}

/** Render `build()`'s answer into `root`, or the error it threw. */
export async function render(root, build) {
  root.replaceChildren(h("p", {class: "muted"}, "loading..."));
  try {
    root.replaceChildren(...[await build()].flat());
  } catch (err) {
    root.replaceChildren(errorBox(err));
  }
}
