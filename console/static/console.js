// The console's pages work without this script; it follows a running
// replay or discard without reloading and keeps the list's selection
// tidy. It writes
// text only (textContent), never HTML.
"use strict";

function followReplay() {
  const job = document.getElementById("job");
  if (!job || job.dataset.state !== "running") return;
  const poll = async () => {
    let s;
    try {
      const resp = await fetch(job.dataset.status, { credentials: "same-origin" });
      s = await resp.json();
    } catch (e) {
      setTimeout(poll, 2000);
      return;
    }
    for (const el of job.querySelectorAll("[data-field]")) {
      el.textContent = String(s[el.dataset.field] ?? "");
    }
    const bar = document.getElementById("progress");
    if (bar) { bar.max = s.to_scan; bar.value = s.scanned; }
    if (s.state === "running") setTimeout(poll, 500);
    else location.reload();
  };
  setTimeout(poll, 500);
}

function tidySelection() {
  const all = document.getElementById("select-all");
  const buttons = [["replay-selected", "Replay"], ["discard-selected", "Discard"]]
    .map(([id, verb]) => [document.getElementById(id), verb])
    .filter(([button]) => button);
  if (buttons.length === 0) return;
  const picks = () => Array.from(document.querySelectorAll("input.pick"));
  const update = () => {
    const n = picks().filter((p) => p.checked).length;
    for (const [button, verb] of buttons) {
      button.disabled = n === 0;
      button.textContent = n ? `${verb} ${n} selected…` : `${verb} selected…`;
    }
  };
  if (all) all.addEventListener("change", () => { for (const p of picks()) p.checked = all.checked; update(); });
  for (const p of picks()) p.addEventListener("change", update);
  update();
}

document.addEventListener("DOMContentLoaded", () => { followReplay(); tidySelection(); });
