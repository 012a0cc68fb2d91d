/**
 * The sandbox's contract constants in one place: answer codes (modelled on the TikTok Business API v1.3 return
 * codes), their default messages and how a client is expected to treat them, and the Events API 2.0 vocabulary.
 */

export const PlatformCode = {
  OK: 0,
  /** The token has no access to the advertiser named in the request. */
  NO_PERMISSION: 40001,
  /** Invalid request: bad or missing parameters, malformed JSON, too many records. Permanent. */
  PARAM_ERROR: 40002,
  /** Rate limited (QPS limit). Retry later. */
  TOO_MANY_REQUESTS: 40100,
  /** The app_id + secret combination is invalid. */
  APP_AUTH_FAILED: 40101,
  /** The access token has expired: refresh it. */
  ACCESS_TOKEN_EXPIRED: 40102,
  /** No Access-Token header. */
  ACCESS_TOKEN_EMPTY: 40104,
  /** The access token is unknown or was revoked: the grant is gone, authorize again. */
  ACCESS_TOKEN_INVALID: 40105,
  /** The refresh token has expired: authorize again. */
  REFRESH_TOKEN_EXPIRED: 40107,
  /** The refresh token is unknown, was rotated away or revoked: treat like OAuth invalid_grant. */
  REFRESH_TOKEN_INVALID: 40108,
  /** The auth_code is unknown, expired, already used, or its PKCE code_verifier does not match. */
  AUTH_CODE_INVALID: 40110,
  /** Sandbox-only: no such route. */
  NOT_FOUND: 40400,
  /** Internal error. Retry later. */
  SYSTEM_ERROR: 50000,
  /** Service temporarily unavailable. Retry later. */
  SERVICE_UNAVAILABLE: 50002,
} as const;

export type PlatformCodeValue = (typeof PlatformCode)[keyof typeof PlatformCode];

export const CODE_MESSAGES: Readonly<Record<number, string>> = {
  [PlatformCode.OK]: 'OK',
  [PlatformCode.NO_PERMISSION]: 'No permission to operate this advertiser.',
  [PlatformCode.PARAM_ERROR]: 'Invalid parameters.',
  [PlatformCode.TOO_MANY_REQUESTS]: 'Requests made too frequently. Please try again later.',
  [PlatformCode.APP_AUTH_FAILED]: 'Authentication failed: the combination of app_id and secret is invalid.',
  [PlatformCode.ACCESS_TOKEN_EXPIRED]: 'Access token has expired.',
  [PlatformCode.ACCESS_TOKEN_EMPTY]: 'Access token is empty. Please set the Access-Token header.',
  [PlatformCode.ACCESS_TOKEN_INVALID]: 'Access token is incorrect or has been revoked.',
  [PlatformCode.REFRESH_TOKEN_EXPIRED]: 'Refresh token has expired.',
  [PlatformCode.REFRESH_TOKEN_INVALID]: 'Invalid refresh token: it is incorrect, has been rotated or revoked.',
  [PlatformCode.AUTH_CODE_INVALID]: 'auth_code invalid: unknown, expired or already used.',
  [PlatformCode.NOT_FOUND]: 'Not found.',
  [PlatformCode.SYSTEM_ERROR]: 'System error. Please try again later.',
  [PlatformCode.SERVICE_UNAVAILABLE]: 'Service is temporarily unavailable. Please try again later.',
};

export function messageFor(code: number): string {
  return CODE_MESSAGES[code] ?? `Error ${code}.`;
}

/** How a well-behaved client should react to a code (documentation for the client side and for tests). */
export type CodeClass = 'ok' | 'permanent' | 'retry' | 'refresh' | 'reauthorize';

export const CODE_CLASS: Readonly<Record<number, CodeClass>> = {
  [PlatformCode.OK]: 'ok',
  [PlatformCode.NO_PERMISSION]: 'permanent',
  [PlatformCode.PARAM_ERROR]: 'permanent',
  [PlatformCode.TOO_MANY_REQUESTS]: 'retry',
  [PlatformCode.APP_AUTH_FAILED]: 'permanent',
  [PlatformCode.ACCESS_TOKEN_EXPIRED]: 'refresh',
  [PlatformCode.ACCESS_TOKEN_EMPTY]: 'permanent',
  [PlatformCode.ACCESS_TOKEN_INVALID]: 'reauthorize',
  [PlatformCode.REFRESH_TOKEN_EXPIRED]: 'reauthorize',
  [PlatformCode.REFRESH_TOKEN_INVALID]: 'reauthorize',
  [PlatformCode.AUTH_CODE_INVALID]: 'permanent',
  [PlatformCode.NOT_FOUND]: 'permanent',
  [PlatformCode.SYSTEM_ERROR]: 'retry',
  [PlatformCode.SERVICE_UNAVAILABLE]: 'retry',
};

export { PLATFORM_EVENT_SOURCES as EVENT_SOURCES } from '../console/platform-events.js';
import { PLATFORM_EVENT_SOURCES as EVENT_SOURCES } from '../console/platform-events.js';
export type EventSource = (typeof EVENT_SOURCES)[number];

/** Standard events of Events API 2.0, and the legacy names the platform still accepts (one list, shared with the
 * console, which validates mappings against it). */
export { STANDARD_PLATFORM_EVENTS as STANDARD_EVENTS, LEGACY_PLATFORM_EVENTS as LEGACY_EVENTS } from '../console/platform-events.js';
import { PLATFORM_EVENTS } from '../console/platform-events.js';

export const KNOWN_EVENTS: ReadonlySet<string> = new Set<string>(PLATFORM_EVENTS);

export const MAX_RECORDS_PER_BATCH = 1000;

/** Path prefix of the JSON API; the authorize page lives outside it. */
export const API_PREFIX = '/open_api/v1.3';
export const AUTHORIZE_PATH = '/portal/auth';
