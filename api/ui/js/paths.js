// Paths between two objects (or entities): each end given by id, or by a title that
// /v1/find_exact resolves to its best hit; each path with its nodes, edges and evidence.
import {api, h, errorBox, objectLink} from "./api.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function resolveEnd(text) {
  if (UUID.test(text)) {
    // an object's title when it is one (an entity id is answered 404: shown as the id)
    return api("GET", `/v1/objects/${text}`).catch(() => ({id: text, title: text}));
  }
  const page = await api("POST", "/v1/find_exact", {query: text, limit: 1});
  if (!page.objects.length) throw new Error(`nothing found for "${text}"`);
  return page.objects[0];
}

function nodeLabel(node) {
  if (node.type === "entity") return h("span", {class: "step"}, node.name || node.id,
                                       h("span", {class: "badge"}, node.label || "entity"));
  return h("span", {class: "step"}, objectLink(node), h("span", {class: "badge"}, node.kind || "object"));
}

function edgeLabel(edge) {
  const name = edge.relation_type || edge.predicate || edge.type;
  const cites = edge.evidence.map(c => c.snippet || c.note || c.text).filter(Boolean);
  return h("span", {class: "edge", title: cites.join("\n")},
           edge.forward ? ` —${name}→ ` : ` ←${name}— `);
}

export async function pathsPage(root, _rest, params) {
  const from = h("input", {id: "path-from", class: "wide", placeholder: "from: id or title",
                           value: params.get("from") || ""});
  const to = h("input", {id: "path-to", class: "wide", placeholder: "to: id or title",
                         value: params.get("to") || ""});
  const results = h("div", {id: "path-results"});

  async function run() {
    results.replaceChildren(h("p", {class: "muted"}, "searching..."));
    try {
      const [a, b] = await Promise.all([resolveEnd(from.value.trim()), resolveEnd(to.value.trim())]);
      const found = await api("POST", "/v1/paths", {from: [a.id], to: [b.id], k: 5});
      results.replaceChildren(
        h("p", {class: "muted", id: "path-status"}, `from `, objectLink(a), ` to `, objectLink(b),
          `: ${found.status}`, found.cut_by.length ? ` (cut by ${found.cut_by.join(", ")})` : ""),
        ...found.paths.map(p => h("div", {class: "path", "data-test": "path"},
          h("span", {class: "muted"}, `${p.hops} hop(s), strength ${p.strength.toFixed(3)}: `),
          p.nodes.flatMap((n, i) => i < p.edges.length ? [nodeLabel(n), edgeLabel(p.edges[i])]
                                                        : [nodeLabel(n)]))));
    } catch (err) {
      results.replaceChildren(errorBox(err));
    }
  }

  root.append(h("h1", {}, "Paths"),
              h("form", {class: "bar", onsubmit: (e) => { e.preventDefault(); run(); }},
                from, to, h("button", {type: "submit", id: "path-button"}, "Find paths")),
              results);
  if (from.value && to.value) await run();
}
