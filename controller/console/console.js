// The pit console's live page: each section's HTML comes from the server's event stream (/events) when it
// changed; what a supervisor typed into a form (not yet sent) is kept across the update. No framework.
"use strict";
(function () {
  const live = document.getElementById("live");

  // What was typed belongs to its form's claim or round: a round's settle or void form typed for round N is not
  // round N+1's when the round changes under it (one Enter would act on the wrong round).
  function key(input) {
    const form = input.form;
    const what = form && form.querySelector("input[name=claim_id], input[name=round_id]");
    return (form ? form.getAttribute("action") : "") + "|" + (what ? what.value : "") + "|" + input.name;
  }

  const shown = {};

  function replace(el, html) {
    if (shown[el.id] === html) return;  // the same again (a reconnect): leave the forms alone
    shown[el.id] = html;
    const typed = {};
    const opened = {};
    let focused = null;
    el.querySelectorAll("details[id], details[data-key]").forEach(function (d) {
      opened[d.id || d.dataset.key] = d.open;
    });
    el.querySelectorAll("input:not([type=hidden])").forEach(function (i) {
      if (i.value) typed[key(i)] = i.value;
      if (i === document.activeElement) focused = key(i);
    });
    el.innerHTML = html;
    el.querySelectorAll("details[id], details[data-key]").forEach(function (d) {
      const k = d.id || d.dataset.key;
      if (k in opened) d.open = opened[k];
    });
    el.querySelectorAll("input:not([type=hidden])").forEach(function (i) {
      const k = key(i);
      if (k in typed) i.value = typed[k];
      if (k === focused) i.focus();
    });
  }

  function state(text, stale) {
    if (live) live.textContent = text;
    document.body.classList.toggle("stale", stale);
  }

  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("update", function (ev) {
      const parts = JSON.parse(ev.data);
      Object.keys(parts).forEach(function (id) {
        const el = document.getElementById(id);
        if (el) replace(el, parts[id]);
        else location.reload();  // another kind of daemon answers now (a table, a link authority): its page
      });
      state("live", false);
    });
    es.addEventListener("ended", function () { location.reload(); });  // the session ended: log in again
    es.onopen = function () { state("live", false); };
    es.onerror = function () {
      state("reconnecting…", true);
      if (es.readyState === EventSource.CLOSED) setTimeout(function () { location.reload(); }, 3000);
    };
  }

  // The casino's clock (the table's time zone), to the second.
  const clock = document.getElementById("clock");
  // A zone the browser does not know ("localtime" passes the daemon's check) leaves the page's own clock as it was
  // drawn: it must not stop the live updates below.
  let fmt = null;
  try {
    if (clock && window.Intl) {
      fmt = new Intl.DateTimeFormat("en-US", {timeZone: clock.dataset.zone, hour: "2-digit", minute: "2-digit",
                                              second: "2-digit", hourCycle: "h23", timeZoneName: "short"});
    }
  } catch (e) {
    fmt = null;
  }
  if (fmt) setInterval(function () { clock.textContent = fmt.format(new Date()); }, 1000);

  if (document.getElementById("meters")) connect();
})();
