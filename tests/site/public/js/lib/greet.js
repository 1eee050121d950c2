// A module imported by app.js: the import itself is what the browser test checks.
export function greeting(server) {
  return `Hello from a JavaScript module served by ${server}.`;
}

export function listItems(list, data) {
  for (const item of data.items) {
    const li = document.createElement("li");
    li.textContent = item;
    list.appendChild(li);
  }
}
