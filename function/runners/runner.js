// execbox function runner for JavaScript (Node). It reaches the interpreter
// as `node -e <bootstrap>` (no script file) and reads the request on stdin.
//
// Node cannot move its own fds, so the function runs in a child Node
// process (the same runner, argv "child") whose fds 1 and 2 are pipes the
// parent drains into a capped buffer and whose result comes back on fd 3.
// The parent runs no user code; it alone writes the response, and it is the
// only thing on the parent's stdout. Lint needs no child: it only compiles.
(function () {
  'use strict';
  const fs = require('fs');
  const vm = require('vm');
  const cp = require('child_process');

  const MAX_INPUT = 131072;
  const MAX_RESULT = 262144;
  const MAX_STDOUT = 8192;
  const MAX_ERROR = 4096;
  const MAX_TRACEBACK = 16384;
  const FILENAME = 'function.js';
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const exit = process.exit.bind(process);
  const writeSync = fs.writeSync;

  class Failure extends Error {
    constructor(code, message, type) {
      super(message);
      this.code = code;
      this.type = type || '';
    }
  }

  function sleep(ms) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  }

  function readAll(fd, limit) {
    const chunks = [];
    const buf = Buffer.alloc(65536);
    let total = 0;
    while (total <= limit) {
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        if (e.code === 'EAGAIN') { sleep(5); continue; }
        if (e.code === 'EOF') break;
        throw e;
      }
      if (n === 0) break;
      chunks.push(Buffer.from(buf.subarray(0, n)));
      total += n;
    }
    return Buffer.concat(chunks);
  }

  function writeAll(fd, text) {
    let buf = Buffer.from(text, 'utf8');
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(fd, buf));
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
        sleep(5);
      }
    }
  }

  // ---- a small tokenizer: enough to find top-level function declarations
  // and parameter names without running anything.

  const EXPR_KEYWORDS = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void',
    'throw', 'case', 'do', 'else', 'yield', 'await', 'extends']);
  const isIdStart = (c) => /[A-Za-z_$\u0080-\uffff\\]/.test(c);
  const isIdPart = (c) => /[A-Za-z0-9_$\u0080-\uffff\\]/.test(c);
  const isNewline = (c) => c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029';

  function tokenize(src) {
    const toks = [];
    const braces = []; // '{' or 'tpl' (a template's ${ … })
    const n = src.length;
    let i = 0;
    let nl = false;
    const regexAllowed = () => {
      const t = toks[toks.length - 1];
      if (!t) return true;
      if (t.type === 'punct') return ![')', ']', '++', '--'].includes(t.value);
      if (t.type === 'name') return EXPR_KEYWORDS.has(t.value);
      return false;
    };
    const template = () => { // after ` or after the } closing ${ … }
      while (i < n) {
        const c = src[i];
        if (c === '\\') { i += 2; continue; }
        if (c === '`') { i++; return; }
        if (c === '$' && src[i + 1] === '{') { i += 2; braces.push('tpl'); return; }
        i++;
      }
    };
    while (i < n) {
      const c = src[i];
      if (isNewline(c)) { nl = true; i++; continue; }
      if (/\s/.test(c)) { i++; continue; }
      if (c === '/' && src[i + 1] === '/') {
        while (i < n && !isNewline(src[i])) i++;
        continue;
      }
      if (c === '/' && src[i + 1] === '*') {
        let j = src.indexOf('*/', i + 2);
        j = j < 0 ? n : j + 2;
        if (/[\n\r\u2028\u2029]/.test(src.slice(i, j))) nl = true;
        i = j;
        continue;
      }
      const start = i;
      let tok;
      if (c === '"' || c === "'") {
        i++;
        while (i < n && src[i] !== c && !isNewline(src[i])) i += src[i] === '\\' ? 2 : 1;
        i++;
        tok = { type: 'str' };
      } else if (c === '`') {
        i++;
        template();
        tok = { type: 'tpl' };
      } else if (c === '}' && braces[braces.length - 1] === 'tpl') {
        braces.pop();
        i++;
        template();
        tok = { type: 'tpl' };
      } else if (c === '/' && regexAllowed()) {
        i++;
        let cls = false;
        while (i < n && !isNewline(src[i])) {
          const d = src[i];
          if (d === '\\') { i += 2; continue; }
          i++;
          if (d === '[') cls = true;
          else if (d === ']') cls = false;
          else if (d === '/' && !cls) break;
        }
        while (i < n && isIdPart(src[i])) i++;
        tok = { type: 'regex' };
      } else if (isIdStart(c)) {
        while (i < n && isIdPart(src[i])) i++;
        tok = { type: 'name', value: src.slice(start, i) };
      } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] || ''))) {
        while (i < n && /[0-9A-Za-z_.]/.test(src[i])) i++;
        tok = { type: 'num' };
      } else {
        const multi = ['...', '=>', '++', '--'].find((p) => src.startsWith(p, i));
        const value = multi || c;
        i += value.length;
        if (value === '{') braces.push('{');
        else if (value === '}') braces.pop();
        tok = { type: 'punct', value };
      }
      tok.nl = nl;
      nl = false;
      toks.push(tok);
    }
    return toks;
  }

  const isPunct = (t, v) => t && t.type === 'punct' && t.value === v;
  const isName = (t, v) => t && t.type === 'name' && (v === undefined || t.value === v);

  // Names of the top-level function declarations of src, in source order.
  function topLevelFunctions(src) {
    const t = tokenize(src);
    const names = [];
    let depth = 0;
    for (let k = 0; k < t.length; k++) {
      const tok = t[k];
      if (tok.type === 'punct') {
        if ('([{'.includes(tok.value)) depth++;
        else if (')]}'.includes(tok.value)) depth--;
        continue;
      }
      if (depth !== 0 || !isName(tok, 'function')) continue;
      let first = k;
      if (isName(t[k - 1], 'async') && !tok.nl) first = k - 1;
      const prev = t[first - 1];
      const endsExpr = prev && (['num', 'str', 'tpl', 'regex'].includes(prev.type) ||
        (prev.type === 'name' && !EXPR_KEYWORDS.has(prev.value)) || isPunct(prev, ')') || isPunct(prev, ']'));
      const statement = !prev || isPunct(prev, ';') || isPunct(prev, '}') || (t[first].nl && endsExpr);
      if (!statement) continue;
      let j = k + 1;
      if (isPunct(t[j], '*')) j++;
      if (isName(t[j])) names.push(t[j].value);
    }
    return names;
  }

  // The parameters of fn: {names, pattern, rest}, read from its source text.
  function parameters(fn) {
    const t = tokenize(Function.prototype.toString.call(fn));
    let k = 0;
    if (isName(t[k], 'async') && !isPunct(t[k + 1], '=>')) k++;
    if (isName(t[k]) && isPunct(t[k + 1], '=>')) return [{ name: t[k].value }];
    while (k < t.length && !isPunct(t[k], '(')) k++;
    const params = [];
    let cur = [];
    let depth = 0;
    for (; k < t.length; k++) {
      const x = t[k];
      if (x.type === 'punct' && '([{'.includes(x.value)) {
        if (++depth === 1) continue;
      } else if (x.type === 'punct' && ')]}'.includes(x.value)) {
        if (--depth === 0) break;
      } else if (depth === 1 && isPunct(x, ',')) {
        params.push(cur);
        cur = [];
        continue;
      }
      cur.push(x);
    }
    if (cur.length) params.push(cur);
    return params.map((p) => {
      if (isPunct(p[0], '...')) return { rest: true, name: isName(p[1]) ? p[1].value : '' };
      if (isName(p[0])) return { name: p[0].value };
      return { pattern: true };
    });
  }

  // The arguments for fn: params by parameter name, or the whole params
  // object for a function of one destructured parameter.
  function argumentsFor(fn, name, params) {
    const list = parameters(fn);
    const keys = Object.keys(params);
    if (list.length === 1 && list[0].pattern) return [params];
    if (list.some((p) => p.pattern)) {
      throw new TypeError(name + '() cannot take params: use plain parameter names or one destructured object');
    }
    const names = list.filter((p) => !p.rest).map((p) => p.name);
    for (const key of keys) {
      if (!names.includes(key)) throw new TypeError(name + "() got an unexpected argument '" + key + "'");
    }
    const args = names.map((n) => (Object.prototype.hasOwnProperty.call(params, n) ? params[n] : undefined));
    while (args.length && args[args.length - 1] === undefined) args.pop();
    return args;
  }

  function syntaxPosition(e) {
    const lines = String(e && e.stack || '').split('\n');
    const m = /^function\.js:(\d+)$/.exec(lines[0]);
    if (!m) return { line: 1, column: 0, end: 1 };
    const under = lines[2] || '';
    const caret = under.indexOf('^');
    const column = caret >= 0 ? caret : under.length;
    const end = caret >= 0 ? caret + /^\^*/.exec(under.slice(caret))[0].length : column;
    return { line: Number(m[1]), column, end: Math.max(end, column + 1) };
  }

  function lint(code) {
    try {
      new vm.Script(code, { filename: FILENAME }); // compiles; never runs
      return [];
    } catch (e) {
      const p = syntaxPosition(e);
      const message = e instanceof Error ? e.message : String(e);
      return [{ line: p.line, column: p.column, endLine: p.line, endColumn: p.end, message, type: 'error' }];
    }
  }

  function notSerialisable(type) {
    return new Failure('result_invalid',
      'result is not valid JSON: result contains a value of type ' + type + ', which is not JSON serialisable');
  }

  const BOXED = [Number.prototype, String.prototype, Boolean.prototype];

  function encode(value) {
    if (value === undefined) return 'null';
    let text;
    try {
      text = stringify(value, function (key, v) {
        switch (typeof v) {
          case 'number':
            if (!Number.isFinite(v)) {
              throw new Failure('result_invalid',
                'result is not valid JSON: result contains NaN or Infinity, which strict JSON does not allow');
            }
            return v;
          case 'bigint': case 'function': case 'symbol': case 'undefined':
            throw notSerialisable(typeof v);
          case 'object': {
            if (v === null || Array.isArray(v)) return v;
            const proto = Object.getPrototypeOf(v);
            if (proto !== Object.prototype && proto !== null && !BOXED.includes(proto)) {
              throw notSerialisable((v.constructor && v.constructor.name) || 'object');
            }
            return v;
          }
          default:
            return v;
        }
      });
    } catch (e) {
      if (e instanceof Failure) throw e;
      throw new Failure('result_invalid', 'result is not valid JSON: ' + (e && e.message || String(e)));
    }
    if (Buffer.byteLength(text, 'utf8') > MAX_RESULT) throw new Failure('result_too_large', 'result exceeds 256 KiB');
    return text;
  }

  function describe(e) {
    let type = typeof e;
    let message;
    let stack = '';
    try {
      if (e instanceof Error) {
        type = e.name || (e.constructor && e.constructor.name) || 'Error';
        message = String(e.message);
        stack = String(e.stack || '');
      } else if (e !== null && typeof e === 'object') {
        type = (e.constructor && e.constructor.name) || 'Object';
        message = String(e);
      } else {
        message = String(e);
      }
    } catch (_) {
      message = message || 'exception';
    }
    const frames = stack.split('\n').filter((l) => /^\s+at .*function\.js:\d+/.test(l));
    const traceback = (type + ': ' + message + (frames.length ? '\n' + frames.join('\n') : '')).slice(-MAX_TRACEBACK);
    return { type, message: (message || type).slice(0, MAX_ERROR), traceback };
  }

  // ---- the child: runs the function, reports on fd 3.

  function child() {
    // The parent starts this process before its request has come (a warm
    // pool starts the parent ahead of the call): wait for it without
    // polling, on the event loop.
    const chunks = [];
    let got = 0;
    process.stdin.on('data', (d) => {
      chunks.push(d);
      got += d.length;
      if (got > MAX_INPUT) process.stdin.destroy();
    });
    process.stdin.on('error', () => {});
    process.stdin.on('close', () => run(parse(Buffer.concat(chunks).toString('utf8'))));
  }

  function run(request) {
    let done = false;
    const finish = (fields, data) => {
      if (done) return;
      done = true;
      writeAll(3, stringify(fields) + '\n' + (data === undefined ? '' : data));
      exit(0);
    };
    const fail = (e) => {
      if (e instanceof Failure) {
        const fields = { ok: false, code: e.code, error: e.message.slice(0, MAX_ERROR) };
        if (e.type) fields.type = e.type;
        finish(fields);
        return;
      }
      const d = describe(e);
      finish({ ok: false, code: 'user_error', error: d.message, type: d.type, traceback: d.traceback });
    };
    const code = request.code;
    const params = request.params || {};
    let script;
    try {
      script = new vm.Script(code, { filename: FILENAME });
    } catch (e) {
      const p = syntaxPosition(e);
      const d = describe(e);
      fail(new Failure('syntax_error', d.message + ' (' + FILENAME + ', line ' + p.line + ')', d.type));
      return;
    }
    process.on('uncaughtException', fail);
    process.on('unhandledRejection', fail);
    process.on('beforeExit', () => finish({ ok: false, code: 'user_error', type: 'Error',
      error: 'the function never settled: its promise was still pending when nothing was left to run' }));
    (async () => {
      script.runInThisContext();
      let name = request.entrypoint || '';
      if (!name) {
        const names = topLevelFunctions(code);
        name = names[names.length - 1];
        if (!name) throw new Failure('entrypoint_not_found', 'code defines no top-level function to call');
      }
      let fn;
      try {
        fn = vm.runInThisContext(name); // an identifier, checked by execbox
      } catch (_) {
        throw new Failure('entrypoint_not_found', 'entrypoint ' + stringify(name) + ' is not defined in the code');
      }
      if (typeof fn !== 'function') {
        throw new Failure('entrypoint_not_found', 'entrypoint ' + stringify(name) + ' is not a function');
      }
      const result = await fn(...argumentsFor(fn, name, params));
      finish({ ok: true }, encode(result));
    })().catch(fail);
  }

  // ---- the parent: starts the child, captures its output, answers.

  function respond(fields, data) {
    const parts = [];
    for (const [k, v] of Object.entries(fields)) parts.push(stringify(k) + ':' + stringify(v));
    if (data !== undefined && data !== '') parts.splice(1, 0, '"data":' + data);
    writeAll(1, '{' + parts.join(',') + '}\n');
  }

  function parent() {
    // The function's process starts first, so that it is up by the time
    // the request comes (at once on a cold start, later in a warm pool).
    const c = cp.spawn(process.execPath, [...process.execArgv, 'child'], { stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    c.on('error', (e) => {
      writeSync(2, 'execbox runner: starting the function process: ' + e.message + '\n');
      exit(70);
    });
    c.stdin.on('error', () => {});
    const raw = readAll(0, MAX_INPUT + 1);
    if (raw.length > MAX_INPUT) {
      respond({ ok: false, code: 'input_too_large', error: 'function input exceeds 128 KiB' });
      c.kill('SIGKILL');
      exit(0);
    }
    const request = parse(raw.toString('utf8'));
    if (request.mode === 'lint') {
      respond({ ok: true, diagnostics: lint(request.code) });
      c.kill('SIGKILL');
      exit(0);
    }
    c.stdin.end(raw);
    const kept = [];
    let keptLen = 0;
    let total = 0;
    const keep = (d) => {
      total += d.length;
      const room = MAX_STDOUT - keptLen;
      if (room > 0) {
        kept.push(d.subarray(0, room));
        keptLen += Math.min(room, d.length);
      }
    };
    c.stdout.on('data', keep);
    c.stderr.on('data', keep);
    const result = [];
    let resultLen = 0;
    let resultOver = false;
    c.stdio[3].on('data', (d) => {
      if (resultLen + d.length > 2 * MAX_RESULT) { resultOver = true; return; }
      result.push(d);
      resultLen += d.length;
    });
    let open = 3;
    let ended = null;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      const text = Buffer.concat(result).toString('utf8');
      if (!text) {
        // Nothing to report: the process died or exited early. Pass its
        // status on, and its last output as the diagnostics.
        try { writeSync(2, Buffer.concat(kept)); } catch (_) { /* best effort */ }
        const sig = ended.signal ? (require('os').constants.signals[ended.signal] || 0) : 0;
        exit(ended.code !== null ? ended.code : 128 + sig);
      }
      const nl = text.indexOf('\n');
      let fields = null;
      try {
        fields = parse(nl < 0 ? text : text.slice(0, nl));
      } catch (_) { /* reported below */ }
      if (resultOver || fields === null || typeof fields !== 'object' || Array.isArray(fields)) {
        respond({ ok: false, code: 'output_invalid', error: 'the function result channel carried invalid data' });
        exit(0);
      }
      fields.stdout = Buffer.concat(kept).toString('utf8');
      fields.stdout_truncated = total > MAX_STDOUT;
      respond(fields, nl < 0 ? undefined : text.slice(nl + 1));
      exit(0);
    };
    for (const s of [c.stdout, c.stderr, c.stdio[3]]) {
      s.on('close', () => {
        if (--open === 0 && ended) finish();
      });
    }
    c.on('exit', (code, signal) => {
      ended = { code, signal };
      if (open === 0) finish();
      // A background process of the function may hold the pipes open: do not wait for it.
      else setTimeout(finish, 250);
    });
  }

  try {
    if (process.argv[1] === 'child') child();
    else parent();
  } catch (e) {
    try { writeSync(2, 'execbox runner: ' + (e && e.stack || String(e)) + '\n'); } catch (_) { /* nothing left */ }
    exit(70);
  }
})();
