// raftmq web console: plain JavaScript, no library. Pages are hash routes (#/cluster, #/topics,
// #/topics/T, #/groups, #/groups/G, #/messages, #/backlog); each has a static part (headings,
// forms) built once and a data part refreshed by polling the console's JSON API. Data is always
// inserted as text nodes (never as HTML), and focus survives a refresh (elements carry data-key).
'use strict';

const POLL_MS = 3000;
const state = { page: null, arg: null, timer: null, inFlight: false, generation: 0, loginRequired: false };

// ---- DOM helpers ----
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// Replaces the children of `box`, keeping focus on the element with the same data-key.
function fill(box, ...children) {
  const active = document.activeElement;
  const key = active && box.contains(active) ? active.getAttribute('data-key') : null;
  box.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  if (key) {
    const again = box.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

function fmtTime(ms) {
  if (ms === null || ms === undefined || ms <= 0) return '—';
  return new Date(ms).toLocaleString();
}
function fmtNum(n) {
  if (n === null || n === undefined) return '—';
  return typeof n === 'number' ? n.toLocaleString(undefined, { maximumFractionDigits: 2 }) : String(n);
}
function table(headers, rows, attrs) {
  return h('div', { class: 'table-wrap' }, h('table', attrs || {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { class: x.num ? 'num' : null, scope: 'col' }, x.label || x)))),
    h('tbody', {}, rows)));
}
function cell(v, num) { return h('td', { class: num ? 'num' : null }, v); }

// ---- errors and notices ----
function showError(text) {
  const box = document.getElementById('error');
  if (!text) { box.hidden = true; box.textContent = ''; return; }
  box.hidden = false;
  box.textContent = text;
}
function notice(text) {
  const box = document.getElementById('notice');
  box.hidden = !text;
  box.textContent = text || '';
}

// ---- API ----
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}
async function api(method, path, body) {
  const init = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch('/console/api/' + path, init);
  } catch (e) {
    throw new ApiError(0, 'the console does not answer (' + e.message + ')');
  }
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401 && state.loginRequired) { showLogin(); }
  if (!res.ok) {
    const msg = (data && (data.error || data.message)) || (res.status + ' ' + res.statusText);
    throw new ApiError(res.status, msg);
  }
  return data;
}
const enc = encodeURIComponent;
function partialErrors(data) {
  return data && Array.isArray(data.errors) && data.errors.length ? 'Some brokers did not answer:\n' + data.errors.join('\n') : '';
}

// ---- chart (SVG, our own) ----
function lineChart(points, opts) {
  const W = 600, H = 180, L = 48, R = 8, T = 10, B = 22;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('class', 'chart');
  svg.setAttribute('role', 'img');
  if (opts.id) svg.setAttribute('id', opts.id);
  const last = points.length ? points[points.length - 1].v : null;
  svg.setAttribute('aria-label', `${opts.label}: ${points.length} samples, latest ${last === null ? 'none' : fmtNum(last)}`);
  const add = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
    if (text !== undefined) el.textContent = text;
    svg.append(el);
    return el;
  };
  add('line', { class: 'axis', x1: L, y1: H - B, x2: W - R, y2: H - B });
  add('line', { class: 'axis', x1: L, y1: T, x2: L, y2: H - B });
  if (points.length < 2) {
    add('text', { x: L + 8, y: H / 2 }, points.length ? 'one sample so far; the line appears with the next' : 'no samples yet');
    return svg;
  }
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const vmax = Math.max(1, ...points.map((p) => p.v));
  const x = (t) => L + (W - L - R) * (t - t0) / Math.max(1, t1 - t0);
  const y = (v) => H - B - (H - B - T) * v / vmax;
  const d = points.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  add('path', { class: 'area', d: `${d} L${x(t1).toFixed(1)},${H - B} L${L},${H - B} Z` });
  add('path', { class: 'line', d });
  add('text', { x: 4, y: T + 10 }, fmtNum(vmax));
  add('text', { x: 4, y: H - B }, '0');
  add('text', { x: L, y: H - 6 }, new Date(t0).toLocaleTimeString());
  add('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, new Date(t1).toLocaleTimeString());
  add('text', { x: W - R, y: T + 10, 'text-anchor': 'end' }, opts.label);
  return svg;
}

// ---- message rendering (text, pretty JSON, hex) ----
function hexOf(m) {
  if (m.body_hex) return m.body_hex.replace(/(..)/g, '$1 ').trim();
  const bytes = new TextEncoder().encode(m.body || '');
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0').toUpperCase()).join(' ');
}
function prettyJson(m) {
  if (m.body === null || m.body === undefined) return null;
  try { return JSON.stringify(JSON.parse(m.body), null, 2); } catch (e) { return null; }
}
function messageCard(m, extra) {
  const pre = h('pre', { class: 'body', 'data-view': 'text', tabindex: 0 });
  const json = prettyJson(m);
  const views = { text: m.body !== null && m.body !== undefined ? m.body : '(binary body: see hex)', json, hex: hexOf(m) };
  const buttons = [];
  const show = (view) => {
    pre.textContent = views[view];
    pre.setAttribute('data-view', view);
    for (const b of buttons) b.setAttribute('aria-selected', String(b.dataset.view === view));
  };
  for (const view of ['text', 'json', 'hex']) {
    if (view === 'json' && json === null) continue;
    buttons.push(h('button', { type: 'button', role: 'tab', 'data-view': view, onclick: () => show(view) },
      { text: 'Text', json: 'JSON', hex: 'Hex' }[view]));
  }
  show(json !== null ? 'json' : (m.body !== null && m.body !== undefined ? 'text' : 'hex'));
  const props = Object.entries(m.properties || {}).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]);
  return h('div', { class: 'message', 'data-msg-id': m.msg_id },
    h('div', { class: 'row' },
      h('strong', {}, m.msg_id),
      h('span', { class: 'muted' }, `${m.topic} · queue ${m.queue_id} @ ${m.queue_offset}` + (m.broker ? ` · ${m.broker}` : '')),
      h('span', { class: 'muted' }, 'stored ' + fmtTime(m.store_timestamp))),
    h('dl', { class: 'props' },
      h('dt', {}, 'keys'), h('dd', {}, m.keys || '—'),
      h('dt', {}, 'tags'), h('dd', {}, m.tags || '—'),
      h('dt', {}, 'client msgId'), h('dd', {}, m.uniq_key || '—'),
      h('dt', {}, 'born'), h('dd', {}, `${fmtTime(m.born_timestamp)} from ${m.born_host}`),
      h('dt', {}, 'reconsumed'), h('dd', {}, String(m.reconsume_times)),
      h('dt', {}, 'body'), h('dd', {}, `${fmtNum(m.body_size)} bytes` + (m.body_truncated ? ' (cut)' : ''))),
    h('details', {}, h('summary', {}, 'All properties'), h('dl', { class: 'props' }, props)),
    h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Body view' }, buttons),
    pre,
    extra || null);
}

// ---- pages ----
const pages = {};

pages.cluster = {
  title: 'Cluster',
  mount(main) {
    main.append(h('h1', {}, 'Cluster'), h('div', { id: 'namesrvs', class: 'card' }), h('div', { id: 'groups' }));
  },
  async refresh() {
    const data = await api('GET', 'cluster');
    fill(document.getElementById('namesrvs'), h('h2', {}, 'NameServers'),
      table(['Address', 'State', { label: 'Groups', num: true }], data.namesrvs.map((n) =>
        h('tr', { class: n.ok ? null : 'down', 'data-namesrv': n.addr },
          cell(n.addr), cell(n.ok ? h('span', { class: 'badge leader' }, 'up') : h('span', { class: 'badge bad' }, 'down: ' + n.error)),
          cell(n.ok ? n.groups : '—', true)))));
    const errors = [];
    const box = document.getElementById('groups');
    const seen = new Set();
    for (const g of data.groups) {
      seen.add(g.name);
      let section = box.querySelector(`section[data-group="${CSS.escape(g.name)}"]`);
      if (!section) {
        // Built once per group: the add-node form keeps what is typed while the rest refreshes.
        section = h('section', { class: 'card', 'data-group': g.name }, h('h2', { class: 'group-head' }), h('div', { class: 'group-table' }),
          addNodeForm(g.name));
        box.append(section);
      }
      const leader = g.replicas.find((r) => r.ok && r.status.role === 'leader');
      const followersLag = {};
      if (leader) for (const f of leader.status.followers) followersLag[f.id] = f.lag;
      const voters = leader ? leader.status.membership.voters : [];
      const rows = g.replicas.map((r) => {
        if (!r.ok) {
          errors.push(`${g.name} ${r.remoting_addr}: ${r.error}`);
          return h('tr', { class: 'down', 'data-addr': r.remoting_addr },
            cell('?'), cell(r.remoting_addr), h('td', { colspan: 8 }, 'down: ' + r.error));
        }
        const s = r.status;
        const flags = [];
        if (s.damaged) flags.push(h('span', { class: 'badge bad', title: s.damage_reason || '' }, 'damaged'));
        if (s.poison_reason) flags.push(h('span', { class: 'badge bad', title: s.poison_reason }, 'poisoned'));
        if (s.apply_failure) flags.push(h('span', { class: 'badge bad', title: s.apply_failure }, 'apply failed'));
        if (s.vote_guard) flags.push(h('span', { class: 'badge warn', title: s.vote_guard }, 'vote guard'));
        if (s.draining) flags.push(h('span', { class: 'badge warn' }, 'draining'));
        if (!flags.length) flags.push(h('span', { class: 'muted' }, 'ok'));
        const isLeader = s.role === 'leader';
        const canLead = leader && !isLeader && voters.includes(s.node_id);
        const lag = isLeader ? '—' : (followersLag[s.node_id] !== undefined ? followersLag[s.node_id] : '?');
        return h('tr', { 'data-node': s.node_id, 'data-role': s.role },
          cell('n' + s.node_id), cell(r.remoting_addr),
          cell(h('span', { class: 'badge role' + (isLeader ? ' leader' : '') }, s.role)),
          cell(s.term, true), cell(fmtNum(s.commit_index), true), cell(fmtNum(s.applied_index), true), cell(lag, true),
          cell(r.disk_used_ratio === null || r.disk_used_ratio === undefined ? '—' : (r.disk_used_ratio * 100).toFixed(1) + ' %', true),
          h('td', {}, flags),
          h('td', {},
            canLead ? h('button', { type: 'button', 'data-key': `lead-${g.name}-${s.node_id}`, 'data-action': 'transfer',
              onclick: () => act(`Leadership of ${g.name} to n${s.node_id}`,
                () => api('POST', `brokers/${enc(g.name)}/transfer-leader`, { to: s.node_id })) }, 'Make leader') : null,
            ' ',
            h('button', { type: 'button', class: 'danger', 'data-key': `rm-${g.name}-${s.node_id}`,
              onclick: () => confirm(`Remove node n${s.node_id} from ${g.name}?`) &&
                act(`Node n${s.node_id} removed from ${g.name}`, () => api('DELETE', `brokers/${enc(g.name)}/nodes/${s.node_id}`)) },
            'Remove')));
      });
      fill(section.querySelector('.group-head'), `${g.name} `, h('span', { class: 'muted' }, `cluster ${g.cluster} · leader `),
        h('span', { class: 'leader-id', 'data-group': g.name }, leader ? 'n' + leader.status.node_id : 'none'),
        h('span', { class: 'muted' }, leader ? ` · term ${leader.status.term}` : ''));
      fill(section.querySelector('.group-table'), table(['Node', 'Remoting', 'Role', { label: 'Term', num: true }, { label: 'Commit', num: true },
        { label: 'Applied', num: true }, { label: 'Lag', num: true }, { label: 'Disk', num: true }, 'State', 'Actions'], rows));
    }
    for (const section of box.querySelectorAll('section[data-group]')) {
      if (!seen.has(section.getAttribute('data-group'))) section.remove();
    }
    return errors.length ? 'Replicas down:\n' + errors.join('\n') : '';
  },
};

function addNodeForm(group) {
  const id = h('input', { name: 'id', type: 'number', min: 0, required: true, 'aria-label': 'Node id', 'data-key': `add-id-${group}` });
  const remoting = h('input', { name: 'remoting', required: true, placeholder: 'ip:port', 'aria-label': 'Remoting address', 'data-key': `add-rem-${group}` });
  const raft = h('input', { name: 'raft', required: true, placeholder: 'ip:port', 'aria-label': 'Raft address', 'data-key': `add-raft-${group}` });
  return h('details', { 'data-key': `add-${group}` }, h('summary', {}, 'Add a node'),
    h('form', { class: 'inline', onsubmit: (e) => {
      e.preventDefault();
      act(`Node n${id.value} added to ${group}`, () => api('POST', `brokers/${enc(group)}/nodes`,
        { id: Number(id.value), remoting_addr: remoting.value.trim(), raft_addr: raft.value.trim() }));
    } },
    h('label', {}, 'Node id', id), h('label', {}, 'Remoting address', remoting), h('label', {}, 'Raft address', raft),
    h('button', { type: 'submit', class: 'primary' }, 'Add node')));
}

pages.topics = {
  title: 'Topics',
  mount(main) {
    const name = h('input', { id: 'new-topic', required: true, pattern: '[%\\|a-zA-Z0-9_\\-]+', maxlength: 127 });
    const read = h('input', { id: 'new-read', type: 'number', min: 1, value: 4 });
    const write = h('input', { id: 'new-write', type: 'number', min: 1, value: 4 });
    const perm = permSelect('new-perm', 6);
    main.append(h('h1', {}, 'Topics'),
      h('section', { class: 'card' }, h('h2', {}, 'Create a topic'),
        h('form', { id: 'topic-create', class: 'inline', onsubmit: (e) => {
          e.preventDefault();
          const topic = name.value.trim();
          act(`Topic ${topic} created`, () => api('POST', 'topics',
            { topic, read_queue_nums: Number(read.value), write_queue_nums: Number(write.value), perm: Number(perm.value) }))
            .then((ok) => { if (ok) name.value = ''; });
        } },
        h('label', { for: 'new-topic' }, 'Name', name), h('label', {}, 'Read queues', read),
        h('label', {}, 'Write queues', write), h('label', {}, 'Permission', perm),
        h('button', { type: 'submit', class: 'primary', id: 'create-topic' }, 'Create'))),
      h('section', { class: 'card' },
        h('div', { class: 'row' }, h('h2', {}, 'All topics'),
          h('label', {}, h('input', { type: 'checkbox', id: 'show-system', onchange: () => refreshNow() }), ' system topics')),
        h('div', { id: 'topic-list' })));
  },
  async refresh() {
    const data = await api('GET', 'topics');
    const system = document.getElementById('show-system').checked;
    const rows = data.topics.filter((t) => system || !t.system).map((t) =>
      h('tr', { 'data-topic': t.topic },
        cell(h('a', { href: '#/topics/' + enc(t.topic), 'data-key': 'topic-' + t.topic }, t.topic)),
        cell(t.groups.join(', ')), cell(t.read_queue_nums, true), cell(t.write_queue_nums, true), cell(t.perm_text),
        cell(t.rate === null || t.rate === undefined ? '—' : fmtNum(t.rate) + '/s', true)));
    fill(document.getElementById('topic-list'),
      rows.length ? table(['Topic', 'Groups', { label: 'Read q.', num: true }, { label: 'Write q.', num: true }, 'Perm',
        { label: 'Rate', num: true }], rows) : h('p', { class: 'muted' }, 'No topics yet.'));
    return partialErrors(data);
  },
};

function permSelect(id, value) {
  return h('select', { id }, [[6, 'RW- (read, write)'], [4, 'R-- (read only)'], [2, '-W- (write only)'], [0, '--- (none)']]
    .map(([v, label]) => h('option', { value: v, selected: v === value }, label)));
}

pages.topic = {
  title: 'Topic',
  mount(main, topic) {
    const read = h('input', { id: 'edit-read', type: 'number', min: 1 });
    const write = h('input', { id: 'edit-write', type: 'number', min: 1 });
    const perm = permSelect('edit-perm', 6);
    main.append(h('p', {}, h('a', { href: '#/topics' }, '← Topics')), h('h1', {}, 'Topic ', h('span', { id: 'topic-name' }, topic)),
      h('section', { class: 'card' }, h('h2', {}, 'Message rate'), h('div', { id: 'topic-chart' })),
      h('section', { class: 'card' }, h('h2', {}, 'Queues'), h('div', { id: 'topic-queues' })),
      h('section', { class: 'card' }, h('h2', {}, 'Change'),
        h('form', { class: 'inline', onsubmit: (e) => {
          e.preventDefault();
          const body = {};
          if (read.value) body.read_queue_nums = Number(read.value);
          if (write.value) body.write_queue_nums = Number(write.value);
          body.perm = Number(perm.value);
          act(`Topic ${topic} changed`, () => api('PUT', 'topics/' + enc(topic), body));
        } }, h('label', {}, 'Read queues', read), h('label', {}, 'Write queues', write), h('label', {}, 'Permission', perm),
        h('button', { type: 'submit', class: 'primary' }, 'Save')),
        h('p', {}, h('button', { type: 'button', class: 'danger', id: 'delete-topic', onclick: () =>
          confirm(`Delete topic ${topic} from every group?`) &&
            act(`Topic ${topic} deleted`, () => api('DELETE', 'topics/' + enc(topic))).then((ok) => { if (ok) location.hash = '#/topics'; }) },
        'Delete topic'))));
    this.formFilled = false;
  },
  async refresh(topic) {
    const data = await api('GET', 'topics/' + enc(topic));
    if (!this.formFilled && data.config) {
      document.getElementById('edit-read').value = data.config.read_queue_nums;
      document.getElementById('edit-write').value = data.config.write_queue_nums;
      document.getElementById('edit-perm').value = data.config.perm;
      this.formFilled = true;
    }
    fill(document.getElementById('topic-chart'), lineChart(data.rates, { label: 'messages/s', id: 'rate-chart' }));
    const rows = [];
    for (const g of data.groups) for (const q of g.queues) {
      rows.push(h('tr', { 'data-queue': `${g.name}-${q.queue_id}` }, cell(g.name), cell(q.queue_id, true),
        cell(fmtNum(q.min_offset), true), cell(fmtNum(q.max_offset), true), cell(fmtTime(q.last_store_ms))));
    }
    fill(document.getElementById('topic-queues'), table(['Group', { label: 'Queue', num: true }, { label: 'Min offset', num: true },
      { label: 'Max offset', num: true }, 'Last stored'], rows));
    return partialErrors(data);
  },
};

pages.groups = {
  title: 'Consumer groups',
  mount(main) {
    main.append(h('h1', {}, 'Consumer groups'), h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Subscription groups'),
        h('label', {}, h('input', { type: 'checkbox', id: 'show-system-groups', onchange: () => refreshNow() }), ' system groups')),
      h('div', { id: 'group-list' })));
  },
  async refresh() {
    const data = await api('GET', 'consumer-groups');
    const system = document.getElementById('show-system-groups').checked;
    const rows = data.groups.filter((g) => system || !g.system).map((g) =>
      h('tr', { 'data-group': g.group },
        cell(h('a', { href: '#/groups/' + enc(g.group), 'data-key': 'group-' + g.group }, g.group)),
        cell(g.brokers.join(', ')), cell(g.lag === null || g.lag === undefined ? '—' : fmtNum(g.lag), true)));
    fill(document.getElementById('group-list'), rows.length
      ? table(['Group', 'Broker groups', { label: 'Lag', num: true }], rows) : h('p', { class: 'muted' }, 'No groups yet.'));
    return partialErrors(data);
  },
};

pages.group = {
  title: 'Consumer group',
  mount(main, group) {
    const resetTopic = h('input', { id: 'reset-topic', required: true });
    const resetTime = h('input', { id: 'reset-time', type: 'datetime-local', step: 1, required: true });
    const cloneTo = h('input', { id: 'clone-to', required: true });
    const cloneTopic = h('input', { id: 'clone-topic', placeholder: 'every topic' });
    main.append(h('p', {}, h('a', { href: '#/groups' }, '← Consumer groups')), h('h1', {}, 'Consumer group ', h('span', {}, group)),
      h('div', { class: 'grid' },
        h('section', { class: 'card' }, h('h2', {}, 'Lag'), h('div', { class: 'row' },
          h('span', { class: 'kpi', id: 'lag-total' }, '…'), h('span', { class: 'muted', id: 'consume-tps' }, '')),
        h('div', { id: 'lag-chart-box' })),
        h('section', { class: 'card' }, h('h2', {}, 'Clients'), h('div', { id: 'group-clients' }))),
      h('section', { class: 'card' }, h('h2', {}, 'Queues'), h('div', { id: 'group-queues' })),
      h('section', { class: 'card' }, h('h2', {}, 'Dead letters'), h('div', { id: 'group-dlq' })),
      h('section', { class: 'card' }, h('h2', {}, 'Operations'),
        h('h3', {}, 'Reset offsets to a time'),
        h('form', { class: 'inline', onsubmit: (e) => {
          e.preventDefault();
          const ms = new Date(resetTime.value).getTime();
          act(`Offsets of ${group} on ${resetTopic.value} reset`, () => api('POST', `consumer-groups/${enc(group)}/reset-offset`,
            { topic: resetTopic.value.trim(), timestamp_ms: ms }));
        } }, h('label', {}, 'Topic', resetTopic), h('label', {}, 'Store time', resetTime),
        h('button', { type: 'submit', class: 'primary' }, 'Reset')),
        h('h3', {}, 'Clone offsets to another group'),
        h('form', { class: 'inline', onsubmit: (e) => {
          e.preventDefault();
          const body = { to: cloneTo.value.trim() };
          if (cloneTopic.value.trim()) body.topic = cloneTopic.value.trim();
          act(`Offsets of ${group} cloned to ${body.to}`, () => api('POST', `consumer-groups/${enc(group)}/clone-offsets`, body));
        } }, h('label', {}, 'To group', cloneTo), h('label', {}, 'Topic', cloneTopic),
        h('button', { type: 'submit', class: 'primary' }, 'Clone')),
        h('h3', {}, 'Delete'),
        h('button', { type: 'button', class: 'danger', onclick: () => confirm(`Delete group ${group} and its offsets?`) &&
          act(`Group ${group} deleted`, () => api('DELETE', 'consumer-groups/' + enc(group))).then((ok) => { if (ok) location.hash = '#/groups'; }) },
        'Delete group')));
    const now = new Date(Date.now() - 3600e3 - new Date().getTimezoneOffset() * 60e3);
    resetTime.value = now.toISOString().slice(0, 19);
  },
  async refresh(group) {
    const [data, dlq] = await Promise.all([api('GET', 'consumer-groups/' + enc(group)),
      api('GET', `consumer-groups/${enc(group)}/dlq`).catch((e) => ({ error: e.message }))]);
    document.getElementById('lag-total').textContent = fmtNum(data.lag_total);
    document.getElementById('lag-total').setAttribute('data-lag', String(data.lag_total));
    document.getElementById('consume-tps').textContent = `messages behind · consuming ${fmtNum(data.consume_tps)}/s`;
    fill(document.getElementById('lag-chart-box'), lineChart(data.lag_history, { label: 'lag (messages)', id: 'lag-chart' }));
    fill(document.getElementById('group-clients'),
      data.connections.length ? table(['Client id', 'Address', 'Language', { label: 'Version', num: true }],
        data.connections.map((c) => h('tr', {}, cell(c.client_id), cell(c.client_addr), cell(c.language), cell(c.version, true))))
        : h('p', { class: 'muted' }, 'No client connected.'),
      data.subscriptions.length ? h('h3', {}, 'Subscriptions') : null,
      data.subscriptions.length ? table(['Topic', 'Expression'], data.subscriptions.map((s) => h('tr', {}, cell(s.topic), cell(s.expression)))) : null,
      h('p', { class: 'muted' }, [data.message_model, data.consume_type].filter(Boolean).join(' · ')));
    fill(document.getElementById('group-queues'), data.queues.length
      ? table(['Group', 'Topic', { label: 'Queue', num: true }, { label: 'Broker offset', num: true },
        { label: 'Consumer offset', num: true }, { label: 'Lag', num: true }], data.queues.map((q) =>
        h('tr', { 'data-queue': `${q.broker}-${q.topic}-${q.queue_id}` }, cell(q.broker), cell(q.topic), cell(q.queue_id, true),
          cell(fmtNum(q.broker_offset), true), cell(q.consumer_offset === null ? '—' : fmtNum(q.consumer_offset), true), cell(fmtNum(q.lag), true))))
      : h('p', { class: 'muted' }, 'No committed offsets.'));
    if (dlq.error) fill(document.getElementById('group-dlq'), h('p', { class: 'muted' }, dlq.error));
    else if (!dlq.messages.length) fill(document.getElementById('group-dlq'), h('p', { class: 'muted' }, 'The DLQ is empty.'));
    else {
      fill(document.getElementById('group-dlq'), h('p', {}, `${fmtNum(dlq.total)} dead letters; the oldest:`),
        dlq.messages.map((m) => messageCard(m, h('button', { type: 'button', 'data-key': 'resend-' + m.msg_id,
          onclick: () => act(`Message ${m.msg_id} resent to the group`, () => api('POST', `consumer-groups/${enc(group)}/dlq/resend`, { msg_id: m.msg_id })) },
        'Resend to the group'))));
    }
    return partialErrors(data);
  },
};

pages.messages = {
  title: 'Messages',
  live: false,
  mount(main) {
    const results = h('div', { id: 'message-results', 'aria-live': 'polite' });
    const search = async (what, run) => {
      fill(results, h('p', { class: 'muted' }, 'Searching…'));
      try {
        const data = await run();
        const found = data.messages || [];
        fill(results, h('p', { id: 'found-count' }, `${found.length} message(s) found by ${what}.`),
          partialErrors(data) ? h('p', { class: 'badge warn' }, partialErrors(data)) : null, found.map((m) => messageCard(m)));
        showError('');
      } catch (e) {
        fill(results, h('p', { class: 'badge bad' }, e.message));
      }
    };
    const byId = h('input', { id: 'id-msgid', required: true, size: 34 });
    const keyTopic = h('input', { id: 'key-topic', required: true });
    const key = h('input', { id: 'key-key', required: true });
    const timeTopic = h('input', { id: 'time-topic', required: true });
    const local = (d) => new Date(d - new Date().getTimezoneOffset() * 60e3).toISOString().slice(0, 19);
    const begin = h('input', { id: 'time-begin', type: 'datetime-local', step: 1, value: local(Date.now() - 3600e3) });
    const end = h('input', { id: 'time-end', type: 'datetime-local', step: 1, value: local(Date.now() + 60e3) });
    const traceId = h('input', { id: 'trace-msgid', required: true, size: 34 });
    const traceOut = h('div', { id: 'trace-results' });
    main.append(h('h1', {}, 'Messages'), h('div', { class: 'grid' },
      h('section', { class: 'card' }, h('h2', {}, 'By message id'),
        h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); search('id', () => api('GET', 'messages/by-id?msg_id=' + enc(byId.value.trim()))); } },
          h('label', {}, 'offsetMsgId', byId), h('button', { type: 'submit', class: 'primary', id: 'id-search' }, 'Find'))),
      h('section', { class: 'card' }, h('h2', {}, 'By key'),
        h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); search('key', () => api('GET', `messages/by-key?topic=${enc(keyTopic.value.trim())}&key=${enc(key.value.trim())}`)); } },
          h('label', {}, 'Topic', keyTopic), h('label', {}, 'Key', key), h('button', { type: 'submit', class: 'primary', id: 'key-search' }, 'Find'))),
      h('section', { class: 'card' }, h('h2', {}, 'By store time'),
        h('form', { class: 'inline', onsubmit: (e) => {
          e.preventDefault();
          search('time', () => api('GET', `messages/by-time?topic=${enc(timeTopic.value.trim())}&begin_ms=${new Date(begin.value).getTime()}&end_ms=${new Date(end.value).getTime()}`));
        } }, h('label', {}, 'Topic', timeTopic), h('label', {}, 'From', begin), h('label', {}, 'To', end),
        h('button', { type: 'submit', class: 'primary', id: 'time-search' }, 'Find'))),
      h('section', { class: 'card' }, h('h2', {}, 'Trace'),
        h('form', { class: 'inline', onsubmit: async (e) => {
          e.preventDefault();
          try {
            const data = await api('GET', 'messages/trace?msg_id=' + enc(traceId.value.trim()));
            fill(traceOut, data.records.length ? table(['Type', 'Time', 'Group', 'Client', 'Status'], data.records.map((r) =>
              h('tr', {}, cell(r.trace_type), cell(fmtTime(r.timestamp_ms)), cell(r.group_name),
                cell(r.client_host), cell(`${r.status} · ${r.cost_time_ms} ms`))))
              : h('p', { class: 'muted' }, 'No trace records (tracing is enabled per client).'));
          } catch (err) { fill(traceOut, h('p', { class: 'badge bad' }, err.message)); }
        } }, h('label', {}, 'Client msgId', traceId), h('button', { type: 'submit', class: 'primary' }, 'Trace')), traceOut)),
      h('section', { class: 'card' }, h('h2', {}, 'Results'), results));
  },
  async refresh() { return ''; },
};

pages.backlog = {
  title: 'Delayed & transactions',
  mount(main) { main.append(h('h1', {}, 'Delayed and transactional messages'), h('div', { id: 'backlog' })); },
  async refresh() {
    const data = await api('GET', 'backlog');
    const errors = [];
    fill(document.getElementById('backlog'), data.groups.map((g) => {
      errors.push(...g.errors);
      const half = g.half ? g.half.waiting : null;
      return h('section', { class: 'card', 'data-group': g.name }, h('h2', {}, g.name),
        h('p', {}, 'Transactional (half) messages waiting for a decision: ', h('strong', { class: 'half-waiting' }, fmtNum(half)),
          g.half && !g.half.checked ? h('span', { class: 'muted' }, ' (no check has run yet)') : null),
        table([{ label: 'Level', num: true }, 'Delay', { label: 'Stored', num: true }, { label: 'Delivered', num: true }, { label: 'Waiting', num: true }],
          g.levels.map((l) => h('tr', { 'data-level': l.level }, cell(l.level, true), cell(l.delay || '?'), cell(fmtNum(l.stored), true),
            cell(fmtNum(l.delivered), true), cell(fmtNum(l.waiting), true)))));
    }));
    return errors.length ? errors.join('\n') : '';
  },
};

// ---- actions ----
async function act(done, run) {
  notice('');
  try {
    await run();
    notice(done + '.');
    showError('');
    await refreshNow();
    return true;
  } catch (e) {
    showError(e.message);
    return false;
  }
}

// ---- login ----
function showLogin() {
  const main = document.getElementById('main');
  if (document.getElementById('login-form')) return;
  clearTimeout(state.timer);
  state.page = null;
  const token = h('input', { id: 'login-token', type: 'password', autocomplete: 'current-password', required: true });
  main.replaceChildren(h('section', { class: 'card' }, h('h1', {}, 'Log in'),
    h('p', {}, 'This console is protected by the brokers\' admin token.'),
    h('form', { id: 'login-form', class: 'inline', onsubmit: async (e) => {
      e.preventDefault();
      try {
        await api('POST', 'login', { token: token.value });
        token.value = '';
        showError('');
        document.getElementById('logout').hidden = false;
        route();
      } catch (err) { showError(err.message); }
    } }, h('label', {}, 'Token', token), h('button', { type: 'submit', class: 'primary' }, 'Log in'))));
  token.focus();
}

// ---- routing and polling ----
function parseHash() {
  const parts = (location.hash || '#/cluster').slice(2).split('/');
  const name = parts[0] || 'cluster';
  const arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join('/')) : null;
  if (name === 'topics' && arg) return ['topic', arg];
  if (name === 'groups' && arg) return ['group', arg];
  return [pages[name] ? name : 'cluster', null];
}

function route() {
  const [name, arg] = parseHash();
  state.page = name;
  state.arg = arg;
  state.generation += 1;
  const page = pages[name];
  const main = document.getElementById('main');
  main.replaceChildren();
  notice('');
  showError('');
  page.mount(main, arg);
  document.title = `${page.title}${arg ? ' ' + arg : ''} · raftmq console`;
  const nav = name === 'topic' ? 'topics' : name === 'group' ? 'groups' : name;
  for (const a of document.querySelectorAll('header nav a')) {
    if (a.dataset.page === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  refreshNow();
}

async function refreshNow() {
  clearTimeout(state.timer);
  const page = pages[state.page];
  if (!page) return;
  const generation = state.generation;
  state.inFlight = true;
  try {
    const partial = await page.refresh(state.arg);
    if (generation !== state.generation) return;
    showError(partial || '');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    document.body.setAttribute('data-loaded', state.page);
  } catch (e) {
    if (generation !== state.generation) return;
    if (e.status !== 401) showError(e.message);
    document.body.setAttribute('data-loaded', state.page);
  } finally {
    state.inFlight = false;
    if (generation === state.generation && document.getElementById('live').checked && page.live !== false) {
      state.timer = setTimeout(refreshNow, POLL_MS);
    }
  }
}

async function start() {
  window.addEventListener('hashchange', route);
  document.getElementById('live').addEventListener('change', () => refreshNow());
  document.getElementById('logout').addEventListener('click', async () => {
    await api('POST', 'logout').catch(() => null);
    document.getElementById('logout').hidden = true;
    showLogin();
  });
  document.addEventListener('keydown', (e) => {
    const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName);
    if (typing || e.altKey || e.ctrlKey || e.metaKey) return;
    const to = { 1: 'cluster', 2: 'topics', 3: 'groups', 4: 'messages', 5: 'backlog' }[e.key];
    if (to) { location.hash = '#/' + to; document.getElementById('main').focus(); }
  });
  try {
    const s = await api('GET', 'session');
    state.loginRequired = s.login_required;
    if (!s.logged_in) { showLogin(); return; }
    document.getElementById('logout').hidden = !s.login_required;
  } catch (e) {
    showError(e.message);
  }
  route();
}

document.addEventListener('DOMContentLoaded', start);
