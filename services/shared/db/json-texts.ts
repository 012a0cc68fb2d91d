/**
 * Many JSON documents sent as ONE text parameter: each serialised by JSON.stringify, joined by the record separator
 * (U+001E), which JSON text never holds unescaped (JSON.stringify escapes every control character), and split in SQL
 * by `string_to_array`, each element cast `::json` as it is stored. Postgres then reads each document's bytes twice
 * (a scan for the separator, json's check of the element) where a JSON array of the documents, read with
 * `json_to_recordset`, is read three times (the parameter's cast to json checks the whole text, the function parses it
 * again and copies each element out), and where a `text[]` parameter escapes each document into the array's text and
 * unescapes it back. On PGlite an append of 1.2 KB records took ~25% less time a row (docs/decisions.md).
 */

/** The separator as SQL sees it. */
const SEPARATOR_SQL = 'chr(30)';
const SEPARATOR = '\x1e';

/** SQL: the documents of the parameter `param` (e.g. '$3') as a text[], one element per document, in order. */
export function splitJsonTexts(param: string): string {
  return `string_to_array(${param}, ${SEPARATOR_SQL})`;
}

/** A value as one document: `undefined` (which JSON has not) as JSON null, as JSON.stringify leaves it out of an object. */
export function jsonText(value: unknown): string {
  return JSON.stringify(value) ?? 'null';
}

/** Documents already serialised (jsonText), as the one parameter splitJsonTexts reads. */
export function joinJsonTexts(texts: readonly string[]): string {
  return texts.join(SEPARATOR);
}

const texts = new WeakMap<object, string>();

/**
 * jsonText of an object that is never changed once built (a record as read from a topic: contract.ts), serialised once
 * however many tables store it (the forwarder's filing stores a conversion's record in the outbox and beside its
 * explanation).
 */
export function unchangingJsonText(value: object): string {
  let text = texts.get(value);
  if (text === undefined) {
    text = jsonText(value);
    texts.set(value, text);
  }
  return text;
}
