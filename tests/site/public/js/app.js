// The page's module: imports a second module, fetches JSON, and writes into the page, so the
// browser test can tell by the DOM that modules load (MIME type text/javascript) and run.
import { greeting, listItems } from "./lib/greet.js";

const out = document.getElementById("js-output");
out.textContent = greeting("ringhttpd");
out.classList.add("ran");

const response = await fetch("data.json");
if (!response.ok) {
  throw new Error(`data.json: HTTP ${response.status}`);
}
listItems(document.getElementById("items"), await response.json());
document.body.dataset.moduleRan = "yes";
