// Search: the query, its mode and order, and filters built from the live schema (kinds, the
// filterable properties of the chosen kind: values, and ranges for numbers and datetimes);
// hits with their evidence, matched words marked, and facets that narrow the search on click.
import {api, h, errorBox, highlight, queryTerms, objectLink} from "./api.js";

const MODES = ["hybrid", "ppr", "auto"];
const SORTS = [["relevance", "relevance"], ["updated_at:desc", "newest first"],
               ["created_at:desc", "newest created"], ["title:asc", "title A-Z"]];
const RANGED = new Set(["number", "datetime"]);
// value facets for the chosen kind's filterable text and boolean fields, at most this many
const FACET_FIELDS = 4;

export async function searchPage(root, _rest, params) {
  const schema = await api("GET", "/v1/schema");
  const q = h("input", {type: "search", id: "q", name: "q", placeholder: "search...",
                        value: params.get("q") || ""});
  const mode = h("select", {id: "mode"}, MODES.map(m => h("option", {value: m}, m)));
  mode.value = params.get("mode") || "hybrid";
  const kind = h("select", {id: "kind"}, h("option", {value: ""}, "any kind"),
                 schema.kinds.map(k => h("option", {value: k.kind}, k.kind)));
  kind.value = params.get("kind") || "";
  const sort = h("select", {id: "sort"}, SORTS.map(([v, label]) => h("option", {value: v}, label)));
  sort.value = params.get("sort") || "relevance";
  const props = h("div", {class: "filters", id: "property-filters"});
  const facetsBox = h("div", {class: "facets", id: "facets"});
  const results = h("div", {id: "results"});

  function chosenFields() {
    const spec = schema.kinds.find(k => k.kind === kind.value);
    return spec ? spec.fields.filter(f => f.filterable) : [];
  }

  function propertyInputs() {
    props.replaceChildren(...chosenFields().flatMap(f => {
      const eq = h("label", {}, `${f.name} (${f.type})`,
        h("input", {"data-property": f.name, "data-type": f.type,
                    placeholder: (f.examples || []).join(", "),
                    value: params.get("p." + f.name) || ""}));
      if (!RANGED.has(f.type)) return [eq];
      const bound = (op, label) => h("label", {}, `${f.name} ${label}`,
        h("input", {"data-range": op, "data-field": f.name, "data-type": f.type,
                    type: f.type === "number" ? "number" : "date",
                    value: params.get(`${op}.${f.name}`) || ""}));
      return [eq, bound("gte", "from"), bound("lte", "to")];
    }));
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

  // the range inputs as one `where`: each bound a leaf, all of them required
  function where() {
    const leaves = [...props.querySelectorAll("input[data-range]")]
      .filter(input => input.value.trim())
      .map(input => ({jsonpath: "$." + input.dataset.field,
                      [input.dataset.range]: input.dataset.type === "number"
                        ? Number(input.value) : rangeDate(input)}));
    return leaves.length ? {and: leaves} : undefined;
  }

  // a date input's day as an instant: "to" means up to the end of that day
  function rangeDate(input) {
    return input.value + (input.dataset.range === "lte" ? "T23:59:59.999999Z" : "T00:00:00Z");
  }

  function facets() {
    const fields = chosenFields().filter(f => !RANGED.has(f.type)).slice(0, FACET_FIELDS);
    return [{field: "kind"}, ...fields.map(f => ({field: "$." + f.name}))];
  }

  function order() {
    if (sort.value === "relevance") return undefined;
    const [field, direction] = sort.value.split(":");
    return {field, order: direction};
  }

  // "more like this" (#/search?similar=<id>) until a query is typed
  let similar = params.get("similar") || "";
  q.addEventListener("input", () => { similar = ""; });

  async function run() {
    const query = q.value.trim();
    if (!query && !similar) return;
    results.replaceChildren(h("p", {class: "muted"}, "searching..."));
    const asked = query ? {query, mode: mode.value} : {similar_to: similar};
    try {
      const page = await api("POST", "/v1/search", {...asked, limit: 10,
                                                    filters: filters(), where: where(),
                                                    facets: facets(), sort: order()});
      facetsBox.replaceChildren(...renderFacets(page.facets || {}));
      results.replaceChildren(...renderPage(page, queryTerms(query)));
    } catch (err) {
      facetsBox.replaceChildren();
      results.replaceChildren(errorBox(err));
    }
  }

  // each facet's buckets; a value bucket narrows the search to it (kind, or the field's input)
  function renderFacets(found) {
    return Object.entries(found).map(([name, facet]) => h("div", {class: "facet",
                                                                  "data-facet": name},
      h("b", {}, name.replace(/^\$\./, "")),
      ...facet.buckets.map(b => h("button", {
        class: "bucket", type: "button", "data-test": "facet-bucket", "data-facet": name,
        "data-value": String(b.value), onclick: () => narrow(name, b.value)},
        `${b.value} (${b.count})`)),
      facet.other ? h("span", {class: "muted"}, ` +${facet.other} more`) : ""));
  }

  function narrow(name, value) {
    if (name === "kind") {
      kind.value = value;
      propertyInputs();
    } else {
      const input = props.querySelector(`input[data-property="${name.slice(2)}"]`);
      if (!input) return;
      input.value = String(value);
    }
    run();
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
                q, mode, kind, sort,
                h("button", {type: "submit", id: "search-button"}, "Search")),
              props, h("div", {class: "search-body"}, facetsBox, results));
  if (q.value || similar) await run();
}

/** One hit: its title (to the object page), kind, score, summary, and evidence snippets. */
export function hit(obj, terms) {
  return h("div", {class: "hit", "data-test": "hit", "data-id": obj.id},
           objectLink(obj, "title"), h("span", {class: "badge"}, obj.kind),
           h("span", {class: "muted"}, ` score ${obj.score.toFixed(4)} `),
           h("a", {href: "#/search?similar=" + encodeURIComponent(obj.id), class: "similar",
                   "data-test": "similar"}, "more like this"),
           obj.summary ? h("div", {}, highlight(obj.summary, terms)) : "",
           obj.evidence.map(ev => h("p", {class: "snippet", "data-test": "snippet"},
                                    ev.title ? h("b", {}, ev.title + ": ") : "",
                                    ev.highlights ? marked(ev.snippet, ev.highlights)
                                      : highlight(ev.snippet, terms))));
}

/** `text` with the spans the API matched ([start, end] offsets) in <mark>. */
function marked(text, spans) {
  const out = h("span", {});
  let last = 0;
  for (const [start, end] of spans) {
    if (start < last) continue;
    out.append(text.slice(last, start), h("mark", {}, text.slice(start, end)));
    last = end;
  }
  out.append(text.slice(last));
  return out;
}
