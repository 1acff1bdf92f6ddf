"""dashboard_dom — reads the dashboard's DOM as Chromium dumps it (tests/http/test_dashboard_run.sh):
text by element id, the seats' text by (stage, replica), the other peers' rows, the probed links'
cells by (from, to), the event log's kinds and the loss curve's points."""
from html.parser import HTMLParser


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.by_id, self.seats, self.others, self.stack, self.points = {}, {}, [], [], ""
        self.links, self.event_kinds = {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        key = None
        if "id" in a: key = ("id", a["id"])
        if tag == "td" and "data-stage" in a: key = ("seat", (int(a["data-stage"]), int(a["data-replica"])))
        if tag == "td" and "data-from" in a: key = ("link", (a["data-from"], a["data-to"]))
        if tag == "td" and a.get("class") == "kind": key = ("kind", len(self.event_kinds)); self.event_kinds.append("")
        if tag == "tr" and a.get("class") == "other": key = ("other", len(self.others)); self.others.append("")
        if a.get("id") == "loss-line": self.points = a.get("points", "")
        self.stack.append((tag, key))

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag: break

    def handle_data(self, data):
        for _, key in self.stack:
            if key is None: continue
            kind, k = key
            if kind == "id": self.by_id[k] = self.by_id.get(k, "") + data
            if kind == "seat": self.seats[k] = self.seats.get(k, "") + data + " "
            if kind == "link": self.links[k] = self.links.get(k, "") + data
            if kind == "kind": self.event_kinds[k] += data
            if kind == "other": self.others[k] += data + " "
