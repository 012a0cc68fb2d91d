___TERMS_OF_SERVICE___

By creating or modifying this file you agree to Google Tag Manager's Community
Template Gallery Developer Terms of Service available at
https://developers.google.com/tag-manager/gallery-tos (or such other URL as
Google may provide), as modified from time to time.


___INFO___

{
  "type": "TAG",
  "id": "cvt_temp_public_id",
  "version": 1,
  "securityGroups": [],
  "displayName": "Event Forwarder",
  "categories": ["CONVERSIONS", "ANALYTICS"],
  "brand": {
    "id": "event_forwarder",
    "displayName": "Event Forwarder"
  },
  "description": "Sends the event to the Event Forwarder ingestion service (endpoint B, POST /v1/sgtm): event name mapping, consent as four booleans, client id, user id, and email and phone normalised and hashed with SHA-256 in the container, Idempotency-Key from the event id, the event time, retries and debug logging.",
  "containerContexts": [
    "SERVER"
  ]
}


___TEMPLATE_PARAMETERS___

[
  {
    "type": "TEXT",
    "name": "endpointUrl",
    "displayName": "Service URL",
    "simpleValueType": true,
    "help": "Base URL of the ingestion service, e.g. https://ingest.example.com (the tag posts to /v1/sgtm).",
    "valueValidators": [{ "type": "NON_EMPTY" }]
  },
  {
    "type": "TEXT",
    "name": "apiKey",
    "displayName": "API key",
    "simpleValueType": true,
    "help": "A workspace API key (evk_live_… or evk_test_…), from the workspace settings, API Key.",
    "valueValidators": [{ "type": "NON_EMPTY" }]
  },
  {
    "type": "SIMPLE_TABLE",
    "name": "eventNameMap",
    "displayName": "Event name mapping (optional; unlisted names are sent as they are)",
    "simpleTableColumns": [
      { "defaultValue": "", "displayName": "Event name in the container", "name": "from", "type": "TEXT" },
      { "defaultValue": "", "displayName": "Event name sent", "name": "to", "type": "TEXT" }
    ]
  },
  {
    "type": "GROUP",
    "name": "identifiersGroup",
    "displayName": "Identifiers",
    "groupStyle": "ZIPPY_OPEN",
    "subParams": [
      {
        "type": "TEXT",
        "name": "clientId",
        "displayName": "Client ID (default: event data client_id)",
        "simpleValueType": true
      },
      {
        "type": "TEXT",
        "name": "userId",
        "displayName": "User ID (default: event data user_id)",
        "simpleValueType": true
      },
      {
        "type": "TEXT",
        "name": "email",
        "displayName": "Email (default: user_data.email_address; plain or already SHA-256 hex)",
        "simpleValueType": true,
        "help": "Trimmed, lower-cased and hashed with SHA-256 in the container; a value that is not an email address is dropped."
      },
      {
        "type": "TEXT",
        "name": "phone",
        "displayName": "Phone (default: user_data.phone_number; plain or already SHA-256 hex of E.164)",
        "simpleValueType": true,
        "help": "Written in E.164 and hashed twice (with and without the +) in the container; a value that cannot be written in E.164 is dropped."
      },
      {
        "type": "TEXT",
        "name": "phoneDefaultCallingCode",
        "displayName": "Country calling code for national phone numbers (e.g. 44)",
        "simpleValueType": true,
        "help": "Numbers without + or 00 get this code and lose one leading 0. Leave empty to drop national numbers.",
        "valueValidators": [{ "type": "REGEX", "args": ["^[1-9][0-9]{0,2}$"] }]
      }
    ]
  },
  {
    "type": "GROUP",
    "name": "consentGroup",
    "displayName": "Consent",
    "groupStyle": "ZIPPY_OPEN",
    "subParams": [
      {
        "type": "RADIO",
        "name": "consentSource",
        "displayName": "Consent state from",
        "radioItems": [
          { "value": "event", "displayValue": "the GA4 event (Consent Mode: x-ga-gcd, else x-ga-gcs)" },
          { "value": "fields", "displayValue": "the four fields below" }
        ],
        "simpleValueType": true,
        "defaultValue": "event"
      },
      {
        "type": "SELECT",
        "name": "consentDefault",
        "displayName": "When the event carries no consent state",
        "selectItems": [
          { "value": "denied", "displayValue": "all denied" },
          { "value": "granted", "displayValue": "all granted" }
        ],
        "simpleValueType": true,
        "defaultValue": "denied",
        "enablingConditions": [{ "paramName": "consentSource", "paramValue": "event", "type": "EQUALS" }]
      },
      { "type": "TEXT", "name": "analyticsStorage", "displayName": "analytics_storage (true/granted/1)", "simpleValueType": true, "enablingConditions": [{ "paramName": "consentSource", "paramValue": "fields", "type": "EQUALS" }] },
      { "type": "TEXT", "name": "adStorage", "displayName": "ad_storage", "simpleValueType": true, "enablingConditions": [{ "paramName": "consentSource", "paramValue": "fields", "type": "EQUALS" }] },
      { "type": "TEXT", "name": "adUserData", "displayName": "ad_user_data", "simpleValueType": true, "enablingConditions": [{ "paramName": "consentSource", "paramValue": "fields", "type": "EQUALS" }] },
      { "type": "TEXT", "name": "adPersonalization", "displayName": "ad_personalization", "simpleValueType": true, "enablingConditions": [{ "paramName": "consentSource", "paramValue": "fields", "type": "EQUALS" }] }
    ]
  },
  {
    "type": "GROUP",
    "name": "advancedGroup",
    "displayName": "Advanced",
    "groupStyle": "ZIPPY_CLOSED",
    "subParams": [
      {
        "type": "TEXT",
        "name": "eventId",
        "displayName": "Event ID, sent as Idempotency-Key (default: event data event_id, else event name and transaction_id)",
        "simpleValueType": true
      },
      {
        "type": "TEXT",
        "name": "eventTime",
        "displayName": "Event time (default: event data event_time, timestamp_micros, else now): Unix seconds, milliseconds or RFC 3339",
        "simpleValueType": true
      },
      {
        "type": "TEXT",
        "name": "maxAttempts",
        "displayName": "Attempts on 429, 5xx, timeouts and network errors (1 to 5; immediate, the container has no timer)",
        "simpleValueType": true,
        "defaultValue": "3",
        "valueValidators": [{ "type": "POSITIVE_NUMBER" }]
      },
      {
        "type": "TEXT",
        "name": "maxRetryAfterSeconds",
        "displayName": "Do not retry when Retry-After asks to wait longer than (seconds)",
        "simpleValueType": true,
        "defaultValue": "1"
      },
      {
        "type": "TEXT",
        "name": "timeoutMs",
        "displayName": "Timeout per attempt (ms)",
        "simpleValueType": true,
        "defaultValue": "3000",
        "valueValidators": [{ "type": "POSITIVE_NUMBER" }]
      },
      {
        "type": "CHECKBOX",
        "name": "debugLogging",
        "checkboxText": "Log every request and answer (always on in preview mode; the API key is never logged)",
        "simpleValueType": true,
        "defaultValue": false
      }
    ]
  }
]


___SANDBOXED_JS_FOR_SERVER___

// Event Forwarder: sends the container's event to the ingestion service's endpoint B (POST /v1/sgtm).
// Sandboxed JavaScript of server-side GTM: no regular expressions, no timers, no libraries; only the APIs below.
const sendHttpRequest = require('sendHttpRequest');
const sha256Sync = require('sha256Sync');
const getAllEventData = require('getAllEventData');
const getContainerVersion = require('getContainerVersion');
const getTimestampMillis = require('getTimestampMillis');
const getType = require('getType');
const logToConsole = require('logToConsole');
const makeInteger = require('makeInteger');
const makeNumber = require('makeNumber');
const makeString = require('makeString');
const JSON = require('JSON');
const Math = require('Math');
const Object = require('Object');

const API_VERSION = '2026-12-01';
const LOG_PREFIX = '[event-forwarder] ';
// The container gives a tag a few seconds; retries are immediate (the sandbox has no timer), so a few at most.
const MAX_ATTEMPTS_CAP = 5;
const RETRYABLE = { '408': true, '429': true, '500': true, '502': true, '503': true, '504': true };

const debug = data.debugLogging === true || getContainerVersion().debugMode === true;
function log(message, detail) {
  if (debug) logToConsole(LOG_PREFIX + message, detail === undefined ? '' : detail);
}

// ---- identifiers (rules and vectors: docs/identifiers.md, clients/vectors/identifiers.json) ----------------------

function isSha256Hex(s) {
  if (s.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = s.charAt(i);
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

function isSpace(code) {
  return code === 32 || (code >= 9 && code <= 13) || code === 0xa0 || code === 0x3000 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0xfeff;
}

function hash(s) {
  return sha256Sync(s, { outputEncoding: 'hex' });
}

// Trim and lower-case; undefined when it is not an email address. Decomposed accents are refused rather than
// hashed differently: the sandbox cannot compose them (NFC).
function normalizeEmail(value) {
  const email = makeString(value).trim().toLowerCase();
  if (email === '' || email.length > 254) return undefined;
  let at = -1;
  for (let i = 0; i < email.length; i++) {
    const code = email.charCodeAt(i);
    if (isSpace(code)) return undefined;
    if (code >= 0x300 && code <= 0x36f) return undefined;
    if (email.charAt(i) === '@') {
      if (at >= 0) return undefined;
      at = i;
    }
  }
  if (at <= 0) return undefined;
  const labels = email.substring(at + 1).split('.');
  if (labels.length < 2) return undefined;
  for (let j = 0; j < labels.length; j++) if (labels[j] === '') return undefined;
  return email;
}

// E.164 from international (+ or 00) or national numbers (with the default calling code: one trunk 0 dropped).
// Spaces and punctuation are ignored, full-width digits read; letters (an extension, words) refuse the number.
function normalizePhone(value, defaultCallingCode) {
  const text = makeString(value).trim();
  let digits = '';
  let plus = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    const code = text.charCodeAt(i);
    if (c >= '0' && c <= '9') digits = digits + c;
    else if (code >= 0xff10 && code <= 0xff19) digits = digits + makeString(code - 0xff10);
    else if ((c === '+' || code === 0xff0b) && digits === '' && !plus) plus = true;
    else if (isSpace(code) || c === '-' || c === '.' || c === '(' || c === ')' || c === '/' || code === 0xff0d || code === 0xff08 || code === 0xff09) continue;
    else return undefined;
  }
  let international;
  if (plus) international = digits;
  else if (digits.substring(0, 2) === '00') international = digits.substring(2);
  else if (defaultCallingCode) international = defaultCallingCode + (digits.charAt(0) === '0' ? digits.substring(1) : digits);
  else return undefined;
  if (international.length < 7 || international.length > 15 || international.charAt(0) === '0') return undefined;
  return '+' + international;
}

function emailIdentifier(value) {
  const raw = makeString(value).trim().toLowerCase();
  if (isSha256Hex(raw)) return { alias_type: 'email', hashed_email: raw };
  const email = normalizeEmail(value);
  if (email === undefined) {
    log('email dropped: not an email address');
    return undefined;
  }
  return { alias_type: 'email', hashed_email: hash(email) };
}

function phoneIdentifier(value, defaultCallingCode) {
  const raw = makeString(value).trim().toLowerCase();
  if (isSha256Hex(raw)) return { alias_type: 'phone', hashed_phone: raw };
  const e164 = normalizePhone(value, defaultCallingCode);
  if (e164 === undefined) {
    log('phone dropped: cannot be written in E.164');
    return undefined;
  }
  return { alias_type: 'phone', hashed_phone: hash(e164), hashed_phone_numeric: hash(e164.substring(1)) };
}

// ---- consent ----------------------------------------------------------------------------------------------------

// Consent Mode v2 `gcd` letters: the state after defaults and updates. t, r, n, v: granted.
function gcdGranted(letter) {
  return letter === 't' || letter === 'r' || letter === 'n' || letter === 'v';
}

function truthy(value) {
  const s = makeString(value).trim().toLowerCase();
  return s === 'true' || s === 'granted' || s === '1' || s === 'yes';
}

function consentState(ev) {
  if (data.consentSource === 'fields') {
    return {
      analytics_storage: truthy(data.analyticsStorage),
      ad_storage: truthy(data.adStorage),
      ad_user_data: truthy(data.adUserData),
      ad_personalization: truthy(data.adPersonalization),
    };
  }
  const gcd = makeString(ev['x-ga-gcd'] || '');
  if (gcd.length >= 9) {
    // 1 <ad_storage> <analytics_storage> <ad_user_data> <ad_personalization> at positions 2, 4, 6, 8.
    return {
      ad_storage: gcdGranted(gcd.charAt(2)),
      analytics_storage: gcdGranted(gcd.charAt(4)),
      ad_user_data: gcdGranted(gcd.charAt(6)),
      ad_personalization: gcdGranted(gcd.charAt(8)),
    };
  }
  const gcs = makeString(ev['x-ga-gcs'] || '');
  if (gcs.length === 4 && gcs.charAt(0) === 'G') {
    // Consent Mode v1: ad_storage, analytics_storage. The v2 purposes were not asked: not granted.
    return { ad_storage: gcs.charAt(2) === '1', analytics_storage: gcs.charAt(3) === '1', ad_user_data: false, ad_personalization: false };
  }
  const granted = data.consentDefault === 'granted';
  return { analytics_storage: granted, ad_storage: granted, ad_user_data: granted, ad_personalization: granted };
}

// ---- the event --------------------------------------------------------------------------------------------------

function mappedName(name) {
  const table = data.eventNameMap || [];
  for (let i = 0; i < table.length; i++) if (table[i].from === name) return table[i].to;
  return name;
}

// Unix seconds from a number (seconds, milliseconds or microseconds) or the text of one; RFC 3339 text as it is.
function eventTime(ev) {
  const candidates = [data.eventTime, ev.event_time];
  for (let i = 0; i < candidates.length; i++) {
    const v = candidates[i];
    if (v === undefined || v === null || v === '') continue;
    const n = makeNumber(v);
    if (n === n && n > 0) {
      if (n > 1e14) return makeInteger(Math.floor(n / 1000000));
      if (n > 1e11) return makeInteger(Math.floor(n / 1000));
      return makeInteger(Math.floor(n));
    }
    if (getType(v) === 'string') return v;
  }
  if (ev.timestamp_micros) return makeInteger(Math.floor(makeNumber(ev.timestamp_micros) / 1000000));
  return makeInteger(Math.floor(getTimestampMillis() / 1000));
}

function payloadOf(ev) {
  const payload = {};
  const keys = Object.keys(ev);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    // Plain personal data and the transport's own fields never leave the container.
    if (k === 'user_data' || k === 'ip_override' || k === 'event_name' || k.substring(0, 2) === 'x-') continue;
    payload[k] = ev[k];
  }
  if (payload.session_id === undefined && ev.ga_session_id !== undefined) payload.session_id = makeString(ev.ga_session_id);
  return payload;
}

function identifiersOf(ev) {
  const ids = [];
  const userData = getType(ev.user_data) === 'object' ? ev.user_data : {};
  const clientId = data.clientId || ev.client_id;
  if (clientId) ids.push({ alias_type: 'client', anonymous_client_id: makeString(clientId) });
  const userId = data.userId || ev.user_id;
  if (userId) ids.push({ alias_type: 'user', user_id: makeString(userId) });
  const email = data.email || userData.email_address || userData.email || userData.sha256_email_address;
  if (email) {
    const id = emailIdentifier(email);
    if (id) ids.push(id);
  }
  const phone = data.phone || userData.phone_number || userData.sha256_phone_number;
  if (phone) {
    const id = phoneIdentifier(phone, makeString(data.phoneDefaultCallingCode || '').trim());
    if (id) ids.push(id);
  }
  return ids;
}

function idempotencyKey(ev, name) {
  let key = data.eventId || ev.event_id;
  if (!key && ev.transaction_id) key = name + ':' + makeString(ev.transaction_id);
  // Without an id the key still makes this execution's retries safe.
  if (!key) key = makeString(ev.client_id || 'anonymous') + ':' + name + ':' + makeString(getTimestampMillis());
  key = makeString(key);
  return key.length > 256 ? hash(key) : key;
}

// ---- sending ----------------------------------------------------------------------------------------------------

const ev = getAllEventData();
const name = mappedName(makeString(ev.event_name || 'unknown'));
const body = [
  {
    event_name: name,
    event_payload: payloadOf(ev),
    event_metadata: { consent: consentState(ev), identifiers: identifiersOf(ev), event_time: eventTime(ev) },
  },
];
const url = makeString(data.endpointUrl).trim();
const endpoint = (url.charAt(url.length - 1) === '/' ? url.substring(0, url.length - 1) : url) + '/v1/sgtm';
const headers = {
  Authorization: 'Bearer ' + makeString(data.apiKey).trim(),
  'Content-Type': 'application/json',
  'Idempotency-Key': idempotencyKey(ev, name),
  'API-Version': API_VERSION,
};
const maxAttempts = Math.max(1, Math.min(MAX_ATTEMPTS_CAP, makeInteger(data.maxAttempts || 3)));
const maxRetryAfter = makeNumber(data.maxRetryAfterSeconds === undefined ? 1 : data.maxRetryAfterSeconds);
const timeout = makeInteger(data.timeoutMs || 3000);
const text = JSON.stringify(body);

log('sending ' + name + ' with Idempotency-Key ' + headers['Idempotency-Key'], body);

function messageOf(response) {
  const parsed = JSON.parse(response.body || '');
  return parsed && parsed.message ? parsed.message : makeString(response.body || '');
}

function attempt(n) {
  sendHttpRequest(endpoint, { method: 'POST', headers: headers, timeout: timeout }, text).then(
    function (response) {
      const status = response.statusCode;
      if (status >= 200 && status < 300) {
        log('accepted (HTTP ' + status + ', attempt ' + n + ')');
        data.gtmOnSuccess();
        return;
      }
      const retryAfter = response.headers ? makeNumber(response.headers['retry-after'] || response.headers['Retry-After'] || 0) : 0;
      if (RETRYABLE[makeString(status)] && n < maxAttempts && !(retryAfter > maxRetryAfter)) {
        log('HTTP ' + status + ' on attempt ' + n + ', retrying: ' + messageOf(response));
        attempt(n + 1);
        return;
      }
      // 400, 401, 413, 415: the same request can never succeed; a retryable status past the limits: give up.
      logToConsole(LOG_PREFIX + 'refused (HTTP ' + status + ', attempt ' + n + '): ' + messageOf(response));
      data.gtmOnFailure();
    },
    function (error) {
      const reason = error && error.reason ? error.reason : 'failed';
      if (n < maxAttempts) {
        log('network ' + reason + ' on attempt ' + n + ', retrying');
        attempt(n + 1);
        return;
      }
      logToConsole(LOG_PREFIX + 'not sent: network ' + reason + ' after ' + n + ' attempts');
      data.gtmOnFailure();
    }
  );
}

if (url === '' || makeString(data.apiKey || '').trim() === '') {
  logToConsole(LOG_PREFIX + 'not sent: set the endpoint URL and the API key');
  data.gtmOnFailure();
} else {
  attempt(1);
}


___SERVER_PERMISSIONS___

[
  {
    "instance": {
      "key": { "publicId": "read_event_data", "versionId": "1" },
      "param": [{ "key": "eventDataAccess", "value": { "type": 1, "string": "any" } }]
    },
    "clientAnnotations": { "isEditedByUser": true },
    "isRequired": true
  },
  {
    "instance": {
      "key": { "publicId": "send_http", "versionId": "1" },
      "param": [{ "key": "allowedUrls", "value": { "type": 1, "string": "any" } }]
    },
    "clientAnnotations": { "isEditedByUser": true },
    "isRequired": true
  },
  {
    "instance": {
      "key": { "publicId": "logging", "versionId": "1" },
      "param": [{ "key": "environments", "value": { "type": 1, "string": "all" } }]
    },
    "clientAnnotations": { "isEditedByUser": true },
    "isRequired": true
  },
  {
    "instance": {
      "key": { "publicId": "read_container_data", "versionId": "1" },
      "param": []
    },
    "isRequired": true
  }
]


___TESTS___

scenarios:
- name: Sends a purchase with hashed identifiers, consent and Idempotency-Key, and succeeds
  code: |-
    let sent;
    mock('sendHttpRequest', function (url, options, body) {
      sent = { url: url, options: options, body: JSON.parse(body) };
      return Promise.create(function (resolve) { resolve({ statusCode: 200, headers: {}, body: '{"status":"success"}' }); });
    });
    runCode(mockData);
    assertApi('gtmOnSuccess').wasCalled();
    assertThat(sent.url).isEqualTo('https://ingest.example.com/v1/sgtm');
    assertThat(sent.options.headers['Idempotency-Key']).isEqualTo('evt-1');
    assertThat(sent.options.headers['API-Version']).isEqualTo('2026-12-01');
    assertThat(sent.body[0].event_name).isEqualTo('purchase');
    assertThat(sent.body[0].event_metadata.consent).isEqualTo({ ad_storage: true, analytics_storage: true, ad_user_data: true, ad_personalization: false });
    assertThat(sent.body[0].event_metadata.identifiers[2]).isEqualTo({ alias_type: 'email', hashed_email: '8c87b489ce35cf2e2f39f80e282cb2e804932a56a213983eeeb428407d43b52d' });
    assertThat(sent.body[0].event_payload.user_data).isUndefined();
- name: Does not retry a 400 and fails the tag
  code: |-
    let calls = 0;
    mock('sendHttpRequest', function () {
      calls++;
      return Promise.create(function (resolve) { resolve({ statusCode: 400, headers: {}, body: '{"error":"Invalid request format","message":"[0].event_name is required"}' }); });
    });
    runCode(mockData);
    assertApi('gtmOnFailure').wasCalled();
    assertThat(calls).isEqualTo(1);
- name: Retries a 503 and succeeds on the second attempt
  code: |-
    let calls = 0;
    mock('sendHttpRequest', function () {
      calls++;
      const status = calls === 1 ? 503 : 200;
      return Promise.create(function (resolve) { resolve({ statusCode: status, headers: { 'retry-after': '1' }, body: '' }); });
    });
    runCode(mockData);
    assertApi('gtmOnSuccess').wasCalled();
    assertThat(calls).isEqualTo(2);
setup: |-
  const JSON = require('JSON');
  const Promise = require('Promise');
  const mockData = { endpointUrl: 'https://ingest.example.com/', apiKey: 'evk_test_example', consentSource: 'event', maxAttempts: '3' };
  mock('getAllEventData', {
    event_name: 'purchase',
    event_id: 'evt-1',
    client_id: 'cid-1',
    user_id: 'u-1',
    transaction_id: 'T-1',
    value: 19.9,
    currency: 'EUR',
    page_location: 'https://shop.example/thanks',
    user_agent: 'Mozilla/5.0',
    'x-ga-gcd': '13t3t3t3p5',
    user_data: { email_address: ' Jane@Example.com ' }
  });


___NOTES___

Source of truth for this template: this file (clients/sgtm/template.tpl in the Event Forwarder repository). Its
sandboxed code is tested there by a harness that runs it against the real service (clients/sgtm/test).
