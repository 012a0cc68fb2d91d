/** Several destinations per workspace on the embedded default (scenarios: test/helpers/several-destinations.ts). */
import { severalDestinations } from '../helpers/several-destinations.js';

severalDestinations({ name: 'several-destinations-e2e' });
