/**
 * The platform's event types that a workspace may map its events to (Events API 2.0 standard events, plus the
 * legacy names the platform still accepts). Saving any other name is refused, on the admin API and in the console,
 * so a typo is caught at setup rather than when the conversion is dead-lettered.
 */
export const STANDARD_PLATFORM_EVENTS = [
  'AddPaymentInfo',
  'AddToCart',
  'AddToWishlist',
  'ApplicationApproval',
  'CompleteRegistration',
  'Contact',
  'CustomizeProduct',
  'Download',
  'FindLocation',
  'InitiateCheckout',
  'Lead',
  'Purchase',
  'Schedule',
  'Search',
  'StartTrial',
  'SubmitApplication',
  'Subscribe',
  'ViewContent',
] as const;

export const LEGACY_PLATFORM_EVENTS = ['ClickButton', 'CompletePayment', 'PlaceAnOrder', 'SubmitForm'] as const;

export const PLATFORM_EVENTS: readonly string[] = [...STANDARD_PLATFORM_EVENTS, ...LEGACY_PLATFORM_EVENTS];

/** Where the platform says events come from (the setup's event_source). */
export const PLATFORM_EVENT_SOURCES = ['WEB', 'APP', 'OFFLINE', 'CRM'] as const;
