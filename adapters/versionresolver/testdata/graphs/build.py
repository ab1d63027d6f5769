# Rebuilds the fixtures in this directory from a checkout of openshift/cincinnati-graph-data unpacked in /tmp/gd
# (channels/ and blocked-edges/): python3 build.py <this directory>. See README.md.
# Builds update-graph fixtures from openshift/cincinnati-graph-data: channel membership from channels/*.yaml,
# risks verbatim from blocked-edges/*.yaml, conditionalEdges grouped by risk set as the Cincinnati service does.
import yaml, json, re, glob, hashlib, sys, os
def key(v):
    m = re.match(r'^(\d+)\.(\d+)\.(\d+)$', v); return tuple(int(x) for x in m.groups())
def ga(v): return re.match(r'^\d+\.\d+\.\d+$', v) is not None
blocks = []
for f in sorted(glob.glob('/tmp/gd/blocked-edges/*.yaml')):
    b = yaml.safe_load(open(f))
    if not b or 'from' not in b or 'to' not in b: continue
    blocks.append(b)
def build(channel, keep):
    versions = [v for v in yaml.safe_load(open(f'/tmp/gd/channels/{channel}.yaml'))['versions'] if ga(v) and keep(v)]
    versions.sort(key=key)
    nodes = []
    for v in versions:
        d = hashlib.sha256((v + '/amd64').encode()).hexdigest()
        nodes.append({"version": v, "payload": "quay.io/openshift-release-dev/ocp-release@sha256:" + d,
                      "metadata": {"io.openshift.upgrades.graph.release.channels": channel,
                                   "io.openshift.upgrades.graph.release.manifestref": "sha256:" + d,
                                   "url": "https://access.redhat.com/errata/RHSA-2024:" + d[:4]}})
    idx = {v: i for i, v in enumerate(versions)}
    # Edges: within a minor from every older patch; across minors from every patch of the previous minor to every
    # patch of the next one at or after the first (the real ones come from release payloads, not in graph-data).
    pairs = []
    for a in versions:
        for b in versions:
            ka, kb = key(a), key(b)
            if ka >= kb: continue
            if ka[:2] == kb[:2] or (ka[0] == kb[0] and ka[1] + 1 == kb[1]):
                pairs.append((a, b))
    risks_of, dropped = {}, set()
    for a, b in pairs:
        rs = []
        for bl in blocks:
            # "from" is searched (not anchored) in the version with its architecture suffix, per graph-data's README.
            if bl['to'] != b or not re.search(bl['from'], a + '+amd64'):
                continue
            if 'matchingRules' not in bl:
                dropped.add((a, b))  # a block without risk data drops the edge for everyone
                continue
            r = {"url": bl['url'], "name": bl['name'], "message": bl['message'], "matchingRules": bl['matchingRules']}
            if r['name'] not in [x['name'] for x in rs]: rs.append(r)
        if rs and (a, b) not in dropped: risks_of[(a, b)] = sorted(rs, key=lambda r: r['name'])
    edges = [[idx[a], idx[b]] for a, b in pairs if (a, b) not in risks_of and (a, b) not in dropped]
    groups = {}
    for (a, b), rs in risks_of.items():
        groups.setdefault(json.dumps(rs, sort_keys=True), {"edges": [], "risks": rs})["edges"].append({"from": a, "to": b})
    cond = sorted(groups.values(), key=lambda g: (key(g["edges"][0]["to"]), g["risks"][0]["name"]))
    return {"version": 1, "nodes": nodes, "edges": edges, "conditionalEdges": cond}
out = sys.argv[1]
g = build('stable-4.16', lambda v: (key(v)[:2] == (4, 15) and 14 <= key(v)[2] <= 20) or (key(v)[:2] == (4, 16) and key(v)[2] <= 6))
json.dump(g, open(os.path.join(out, 'stable-4.16_amd64.json'), 'w'), indent=1)
g2 = build('stable-4.15', lambda v: (key(v)[:2] == (4, 14) and 18 <= key(v)[2] <= 22) or (key(v)[:2] == (4, 15) and key(v)[2] <= 12))
json.dump(g2, open(os.path.join(out, 'stable-4.15_amd64.json'), 'w'), indent=1)
for n, gg in (('4.16', g), ('4.15', g2)):
    print(n, len(gg['nodes']), 'nodes', len(gg['edges']), 'edges', len(gg['conditionalEdges']), 'conditional groups',
          sum(len(c['edges']) for c in gg['conditionalEdges']), 'conditional edges',
          sorted({r['name'] for c in gg['conditionalEdges'] for r in c['risks']}))
