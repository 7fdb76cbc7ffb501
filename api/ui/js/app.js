// The explorer's shell: the key form and namespace chooser, and a hash router over the pages.
import {api, auth, h, errorBox} from "./api.js";
import {searchPage} from "./search.js";
import {objectPage} from "./object.js";
import {graphPage} from "./graph.js";
import {pathsPage} from "./paths.js";
import {memoryPage} from "./memory.js";
import {operatorPage} from "./operator.js";
import {entitiesPage, entityPage} from "./entity.js";
import {entityGraphPage} from "./entity_graph.js";
import {reviewPage} from "./review.js";

const PAGES = {search: searchPage, object: objectPage, graph: graphPage, paths: pathsPage,
               memory: memoryPage, operator: operatorPage, entities: entitiesPage,
               entity: entityPage, "entity-graph": entityGraphPage, review: reviewPage};

const view = document.getElementById("view");
const keyInput = document.getElementById("api-key");
const chooser = document.getElementById("namespace");
const keyState = document.getElementById("key-state");

/** Learn what the key may do (GET /v1/me): fill the namespace chooser when it has several. */
async function loadKey() {
  auth.namespaces = [];
  auth.operator = false;
  chooser.hidden = true;
  if (!auth.key) { keyState.textContent = "enter an API key"; return; }
  try {
    const me = await api("GET", "/v1/me");
    auth.namespaces = me.namespaces;
    auth.operator = me.operator;
    if (!me.namespaces.includes(auth.namespace)) auth.namespace = me.namespaces[0] || "";
    chooser.replaceChildren(...me.namespaces.map(ns => h("option", {value: ns}, ns)));
    chooser.value = auth.namespace;
    chooser.hidden = me.namespaces.length < 2;
    keyState.textContent = `${me.name}: ${me.namespaces.length} namespace(s)` +
      (me.operator ? ", operator" : "");
  } catch (err) {
    keyState.textContent = err.code || String(err);
  }
}

function route() {
  const [path, query] = (location.hash.slice(1) || "/search").split("?");
  const [, name, ...rest] = path.split("/");
  const params = new URLSearchParams(query || "");
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === name);
  }
  const page = PAGES[name] || PAGES.search;
  if (!auth.key) {
    view.replaceChildren(h("h1", {}, "brainstream explorer"),
                         h("p", {}, "Enter an API key above (kept in this browser only)."));
    return;
  }
  // each visit renders into a container of its own: a slower earlier page that answers late
  // writes into a container no longer shown, never into this one
  const container = h("div", {"data-page": name});
  view.replaceChildren(container);
  page(container, rest.map(decodeURIComponent), params)
    .catch(err => container.append(errorBox(err)));
}

document.getElementById("key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  auth.key = keyInput.value.trim();
  keyInput.value = "";
  await loadKey();
  route();
});
chooser.addEventListener("change", () => { auth.namespace = chooser.value; route(); });
window.addEventListener("hashchange", route);
loadKey().then(route);
