// The curator's queue: the possibly-same pairs of a status with their evidence (names, labels,
// aliases, shared neighbours, a few mentions of each), and merge / refuse / defer buttons. A
// decision needs an admin key: the API refuses any other (403 scope_required) and the page says
// so in words.
import {api, h, errorBox} from "./api.js";
import {entityLink} from "./entity.js";

const STATUSES = ["held", "deferred", "verified", "refused"];
const ACTIONS = [["verify", "Merge"], ["refuse", "Refuse"], ["defer", "Defer"]];

function side(end) {
  return h("div", {class: "pair-end", "data-entity": end.id},
           h("h3", {}, entityLink(end), h("span", {class: "badge"}, end.label)),
           h("p", {class: "muted"}, `${end.part_count} parts`,
             end.aliases.length ? ` · aliases: ${end.aliases.join(", ")}` : ""),
           h("ul", {class: "contexts"}, end.contexts.map(c => h("li", {},
             c.snippet.text.slice(0, c.snippet.start),
             h("mark", {}, c.snippet.text.slice(c.snippet.start, c.snippet.end)),
             c.snippet.text.slice(c.snippet.end), " ",
             h("a", {href: `#/object/${c.object_id}`, "data-test": "object-link",
                     "data-id": c.object_id}, "open")))));
}

function pairBox(p, decide) {
  const message = h("div", {class: "pair-message"});
  const buttons = p.status === "verified" || p.status === "refused" ? [] :
    ACTIONS.map(([decision, label]) => h("button", {"data-decision": decision,
                                                    onclick: () => decide(p, decision, message)},
                                         label));
  const confidence = p.confidence === null ? "—" : p.confidence.toFixed(2);
  return h("section", {class: "pair", "data-pair": `${p.from.id}|${p.to.id}`},
           h("p", {}, h("b", {}, `confidence ${confidence}`), ` · ${p.method || ""} · ${p.status}`),
           h("div", {class: "pair-ends"}, side(p.from), side(p.to)),
           h("p", {class: "shared"}, "Both joined to: ",
             p.shared_neighbours.length
               ? p.shared_neighbours.map((s, i) => [i ? ", " : "", entityLink(s)])
               : h("span", {class: "muted"}, "nothing")),
           h("div", {class: "actions"}, buttons), message);
}

export async function reviewPage(root, _path, params) {
  const status = STATUSES.includes(params.get("status")) ? params.get("status") : "held";
  const list = h("div", {id: "pairs"});
  const more = h("button", {id: "more-pairs", hidden: true}, "More pairs");
  let cursor = null;

  async function decide(p, decision, message) {
    message.replaceChildren(h("span", {class: "muted"}, "deciding..."));
    try {
      const done = await api("POST", `/v1/entities/possibly_same/${p.from.id}/${p.to.id}`,
                             {decision});
      message.replaceChildren(h("p", {"data-test": "decided"}, `Now ${done.status}.`));
      for (const b of message.parentElement.querySelectorAll("[data-decision]")) b.disabled = true;
    } catch (err) {
      message.replaceChildren(err.code === "scope_required"
        ? h("p", {class: "error", "data-test": "need-admin"},
            "Deciding needs an API key with the admin scope on this namespace; this key may only read the queue.")
        : errorBox(err));
    }
  }

  async function page() {
    const q = new URLSearchParams({status, limit: "20"});
    if (cursor) q.set("cursor", cursor);
    const got = await api("GET", `/v1/entities/possibly_same?${q}`);
    list.append(...got.pairs.map(p => pairBox(p, decide)));
    if (!list.children.length) list.append(h("p", {class: "muted", id: "no-pairs"}, `No ${status} pairs.`));
    cursor = got.cursor;
    more.hidden = !cursor;
  }
  more.addEventListener("click", () => page());
  root.append(h("h1", {}, "Curator's queue"),
              h("p", {}, STATUSES.map((s, i) => [i ? " · " : "",
                s === status ? h("b", {}, s) : h("a", {href: `#/review?status=${s}`}, s)])),
              h("p", {class: "muted"}, "Pairs the resolver could not decide, most confident first. " +
                "Merge joins them, refuse keeps them apart for good, defer moves the pair to the deferred list."),
              list, more);
  await page();
}
