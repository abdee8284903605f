// Follows a running debate: each turn the worker stores is added as it arrives (built with
// textContent, so nothing a model wrote becomes markup), and the page reloads once the debate
// has ended so the verdict is rendered by the server. A reload resumes after the last turn shown.
// The turns being written (when this server runs the debate) show below, replaced as they grow.
"use strict";
(function () {
  var article = document.getElementById("debate");
  if (!article || !window.EventSource) { return; }
  var list = document.getElementById("turns");
  var id = article.getAttribute("data-debate");
  var after = article.getAttribute("data-after");
  var source = new EventSource("/api/debates/" + id + "/events?after=" + encodeURIComponent(after));

  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined) { node.textContent = text; }
    if (className) { node.className = className; }
    return node;
  }

  source.addEventListener("turn", function (event) {
    var turn = JSON.parse(event.data);
    if (list.querySelector('[data-seq="' + turn.seq + '"]')) { return; }
    var item = element("li", undefined, "turn");
    item.setAttribute("data-seq", String(turn.seq));
    var who = "Round " + turn.round + " \u00b7 " + turn.role + (turn.speaker ? " (" + turn.speaker + ")" : "");
    item.appendChild(element("h3", who));
    item.appendChild(element("p", turn.model + " \u00b7 $" + turn.cost_usd.toFixed(4), "meta"));
    var fields = element("dl");
    turn.fields.forEach(function (pair) {
      fields.appendChild(element("dt", pair[0]));
      fields.appendChild(element("dd", pair[1]));
    });
    item.appendChild(fields);
    list.appendChild(item);
  });

  var writing = element("ul", undefined, "writing");
  writing.setAttribute("aria-live", "polite");
  list.parentNode.insertBefore(writing, list.nextSibling);

  source.addEventListener("writing", function (event) {
    writing.textContent = "";
    JSON.parse(event.data).forEach(function (turn) {
      var who = "Round " + turn.round + " \u00b7 " + turn.role + (turn.speaker ? " (" + turn.speaker + ")" : "");
      var said = turn.reasked ? "re-asked: the reply did not fit its form" : turn.text;
      var item = element("li", undefined, "turn writing");
      item.appendChild(element("h3", who + " \u00b7 writing"));
      item.appendChild(element("p", said));
      writing.appendChild(item);
    });
  });

  source.addEventListener("end", function () {
    source.close();
    window.location.reload();
  });
}());
