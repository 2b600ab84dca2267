// Package webui is the playground `execbox serve` answers at "/": the
// built front end (web/, built by `npm run build` there into dist/, which
// is committed so that the binary needs no Node) embedded in the binary,
// and the rules it is served by.
//
// Every page path answers index.html, never cached, under a Content
// Security Policy that allows scripts, styles and connections to this
// origin only; assets under /assets/ carry a content hash in their names
// and are cached for a year, gzipped when the browser takes it. The API's
// own paths never reach this handler: the server keeps them JSON.
package webui
