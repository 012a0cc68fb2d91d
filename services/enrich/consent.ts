/**
 * What an event's consent allows, in one place (docs/consent.md is the prose of this table). Only GRANTED grants:
 * DENIED and UNSPECIFIED both withhold (endpoint B's booleans arrive as GRANTED/DENIED). Each event is judged by
 * its own flags; nothing an event withheld is taken from it, and what it allowed is used only for the purpose the
 * flag names.
 */
import type { ConsentState } from '../domain/envelope.js';

export interface ConsentDecision {
  /** ad_storage: the event may take part in the identity graph (pseudonymous ids, session data, click ids). */
  readonly graph: boolean;
  /** ad_storage: a click id from its URL may be kept and used. */
  readonly clickIds: boolean;
  /** ad_storage AND ad_user_data: its personal identifiers (user id, organisation, emails, phones) may be linked. */
  readonly personalData: boolean;
  /** ad_storage: the event may become a conversion at all. */
  readonly forward: boolean;
  /** ad_user_data: personal data may be sent with its conversion (pii_mode permitting). */
  readonly sendPersonalData: boolean;
  /** The platform's limited_data_use: false only when ad_user_data is GRANTED. */
  readonly limitedDataUse: boolean;
}

export function consentDecision(consent: ConsentState): ConsentDecision {
  const adStorage = consent.ad_storage === 'GRANTED';
  const adUserData = consent.ad_user_data === 'GRANTED';
  return {
    graph: adStorage,
    clickIds: adStorage,
    personalData: adStorage && adUserData,
    forward: adStorage,
    sendPersonalData: adUserData,
    limitedDataUse: !adUserData,
  };
}
