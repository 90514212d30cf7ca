// Generates whatwg-urls.json, the golden table TestParseWHATWG compares
// the relay's URI parser with: each input and what Node's WHATWG URL
// parser (the one the TypeScript MCP SDK's resource lookup uses) makes of
// it. Run: node mcp/testdata/whatwg-urls.mjs > mcp/testdata/whatwg-urls.json
const inputs = [
  "demo://resource/static/document/architecture.md",
  "DEMO://resource/static/document/architecture.md",
  "Demo://resource/static/document/architecture.md",
  "demo://RESOURCE/static/document/architecture.md",
  "demo://resource/static/x/../document/architecture.md",
  "demo://resource/static/document/./architecture.md",
  "demo://resource/static/document/%2e%2e/document/architecture.md",
  "demo://resource/static/document/.%2E/document/architecture.md",
  "demo://resource/static/document/%2E/architecture.md",
  "demo://resource/static/document/%61rchitecture.md",
  " demo://resource/static/document/architecture.md ",
  "demo://resource/static/docu\tment/architecture.md",
  "demo://resource/static/docu\nment/architecture.md",
  "demo://resource/dynamic/text/1",
  "demo://h",
  "demo://h?x",
  "demo://h#f",
  "demo://h?",
  "demo:/a/../b",
  "demo:a/../b",
  "demo://h/../a",
  "demo:///a/./",
  "demo://h/a/..",
  "demo://h/a//b/../c",
  "demo://h/a b?c d#e f",
  "demo://h/\"<>?\"<>#\"<>",
  "demo://h/é?é#é",
  "demo://Host:080/a",
  "demo://h:/",
  "demo://u:p@H/",
  "demo://u:@h/",
  "demo://:@h/",
  "demo://h/a/%2e%2e%2f",
  "demo://h/a?b/../c",
  "demo://h/%6a%6A",
  "demo://h/%2F",
  "demo://h%41/",
  "demo:",
  "a+b-c.d:x",
  "HTTP://Ex.COM:80",
  "https://ex.com:443/a",
  "http://ex.com:0443/",
  "http://ex.com:8080",
  "http://u:p@ex.com/",
  "http://ex.com/?'",
  "http://1.2.3.4/",
  "ws://EX.com:80/x",
  "file://localhost/etc/x",
  "file:///etc/./x/../y",
  "file:///etc/%2e%2E/y",
  // Refused by the relay (stricter than WHATWG): the golden still says
  // what Node does with them.
  "http://0x7f.1/",
  "http://ex.com/a\\b",
  "http:ex.com/a",
  "http:///ex.com/a",
  "file:///C:/../x",
  "demo://h/%zz",
  "demo://[::1]/",
  "demo://hé/",
  "http://ex.com./",
  "demo://h/a{b}",
  // Refused by both.
  "demo://a b/",
  "1a:x",
  "no-scheme",
  "http://ex.com:99999/",
];
const rows = inputs.map((input) => {
  try {
    return { input, href: new URL(input).href };
  } catch {
    return { input, error: true };
  }
});
console.log(JSON.stringify({ generator: "mcp/testdata/whatwg-urls.mjs", node: process.version, rows }, null, 1));
