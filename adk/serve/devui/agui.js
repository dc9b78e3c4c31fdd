// pyeino dev page, the protocol's two pieces: the AG-UI events of an SSE response body, read as they arrive, and
// RFC 6902 JSON Patch (what STATE_DELTA carries). Plain JS, no dependencies; app.js uses them.
"use strict";
(() => {
  // ---------------------------------------------------------------- SSE: AG-UI events of a response body
  async function* sseEvents(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
        const frames = buffer.split(/\r?\n\r?\n/);
        buffer = done ? "" : frames.pop();
        for (const frame of frames) {
          const data = frame.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
          if (data.length) yield JSON.parse(data.join("\n"));
        }
        if (done) return;
      }
    } finally {
      reader.releaseLock();
    }
  }

  // ---------------------------------------------------------------- JSON Patch (RFC 6902)
  function parsePointer(path) {
    if (path === "") return [];
    if (!path.startsWith("/")) throw new Error(`bad JSON pointer ${path}`);
    return path.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  function applyPatch(doc, ops) {
    let root = structuredClone(doc);
    const get = (path) => parsePointer(path).reduce((v, k) => (v === undefined ? undefined : v[k]), root);
    const parentOf = (path) => {
      const keys = parsePointer(path);
      const last = keys.pop();
      const parent = keys.reduce((v, k) => v[k], root);
      if (parent === undefined || parent === null) throw new Error(`no parent for ${path}`);
      return [parent, last];
    };
    const put = (path, value, insert) => {
      if (path === "") { root = value; return; }
      const [parent, key] = parentOf(path);
      if (Array.isArray(parent)) {
        const i = key === "-" ? parent.length : Number(key);
        parent.splice(i, insert ? 0 : 1, value);
      } else parent[key] = value;
    };
    const remove = (path) => {
      const [parent, key] = parentOf(path);
      const value = parent[key];
      if (Array.isArray(parent)) parent.splice(Number(key), 1); else delete parent[key];
      return value;
    };
    for (const op of ops) {
      switch (op.op) {
        case "add": put(op.path, structuredClone(op.value), true); break;
        case "replace": put(op.path, structuredClone(op.value), false); break;
        case "remove": remove(op.path); break;
        case "move": put(op.path, remove(op.from), true); break;
        case "copy": put(op.path, structuredClone(get(op.from)), true); break;
        case "test":
          if (JSON.stringify(get(op.path)) !== JSON.stringify(op.value)) throw new Error(`test failed at ${op.path}`);
          break;
        default: throw new Error(`unknown patch op ${op.op}`);
      }
    }
    return root;
  }

  window.pyeinoDev = { ...(window.pyeinoDev || {}), sseEvents, applyPatch };
})();
