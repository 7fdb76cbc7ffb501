// Search: the query, its mode, and filters built from the live schema (kinds, and the
// filterable properties of the chosen kind); hits with their evidence, query terms marked.
import {api, h, errorBox, highlight, queryTerms, objectLink} from "./api.js";

const MODES = ["hybrid", "ppr", "auto"];

export async function searchPage(root, _rest, params) {
  const schema = await api("GET", "/v1/schema");
  const q = h("input", {type: "search", id: "q", name: "q", placeholder: "search...",
                        value: params.get("q") || ""});
  const mode = h("select", {id: "mode"}, MODES.map(m => h("option", {value: m}, m)));
  mode.value = params.get("mode") || "hybrid";
  const kind = h("select", {id: "kind"}, h("option", {value: ""}, "any kind"),
                 schema.kinds.map(k => h("option", {value: k.kind}, k.kind)));
  kind.value = params.get("kind") || "";
  const props = h("div", {class: "filters", id: "property-filters"});
  const results = h("div", {id: "results"});

  function propertyInputs() {
    const spec = schema.kinds.find(k => k.kind === kind.value);
    props.replaceChildren(...(spec ? spec.fields.filter(f => f.filterable) : []).map(f =>
      h("label", {}, `${f.name} (${f.type})`,
        h("input", {"data-property": f.name, "data-type": f.type,
                    placeholder: (f.examples || []).join(", "),
                    value: params.get("p." + f.name) || ""}))));
  }
  kind.addEventListener("change", propertyInputs);
  propertyInputs();

  function filters() {
    const out = {};
    if (kind.value) out.kind = kind.value;
    for (const input of props.querySelectorAll("input[data-property]")) {
      const raw = input.value.trim();
      if (!raw) continue;
      const values = raw.split(",").map(v => v.trim()).filter(Boolean).map(v =>
        input.dataset.type === "number" ? Number(v)
          : input.dataset.type === "boolean" ? v === "true" : v);
      out[input.dataset.property] = values.length === 1 ? values[0] : values;
    }
    return Object.keys(out).length ? out : undefined;
  }

  async function run() {
    if (!q.value.trim()) return;
    const query = q.value.trim();
    results.replaceChildren(h("p", {class: "muted"}, "searching..."));
    try {
      const page = await api("POST", "/v1/search", {query, mode: mode.value, limit: 10,
                                                    filters: filters()});
      results.replaceChildren(...renderPage(page, queryTerms(query)));
    } catch (err) {
      results.replaceChildren(errorBox(err));
    }
  }

  function renderPage(page, terms) {
    const out = [h("p", {class: "muted", id: "answer-info"},
                   `${page.objects.length} hit(s), mode ${page.mode || mode.value}`,
                   page.degrade ? h("span", {class: "badge warn"}, "degraded: " + page.degrade) : "",
                   page.truncated ? h("span", {class: "badge warn"}, "truncated") : "")];
    if (!page.objects.length) out.push(h("p", {}, "No hits."));
    out.push(...page.objects.map(obj => hit(obj, terms)));
    if (page.has_more && page.result_set_id) out.push(more(page.result_set_id, terms));
    return out;
  }

  // the next page of the result set, appended with a button for the one after it
  function more(resultSetId, terms) {
    const button = h("button", {class: "more", onclick: async () => {
      button.disabled = true;
      try {
        const next = await api("POST", "/v1/continue", {result_set_id: resultSetId, limit: 10});
        button.replaceWith(...next.objects.map(obj => hit(obj, terms)),
                           next.has_more ? more(resultSetId, terms) : "");
      } catch (err) {
        button.replaceWith(errorBox(err));
      }
    }}, "more");
    return button;
  }

  root.append(h("h1", {}, "Search"),
              h("form", {class: "bar", onsubmit: (e) => { e.preventDefault(); run(); }},
                q, mode, kind, h("button", {type: "submit", id: "search-button"}, "Search")),
              props, results);
  if (q.value) await run();
}

/** One hit: its title (to the object page), kind, score, summary, and evidence snippets. */
export function hit(obj, terms) {
  return h("div", {class: "hit", "data-test": "hit", "data-id": obj.id},
           objectLink(obj, "title"), h("span", {class: "badge"}, obj.kind),
           h("span", {class: "muted"}, ` score ${obj.score.toFixed(4)}`),
           obj.summary ? h("div", {}, highlight(obj.summary, terms)) : "",
           obj.evidence.map(ev => h("p", {class: "snippet", "data-test": "snippet"},
                                    ev.title ? h("b", {}, ev.title + ": ") : "",
                                    highlight(ev.snippet, terms))));
}
