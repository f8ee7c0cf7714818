/* Types of the ldptext npm package (ldptext-web.js over the WebAssembly build of libldptext).
 * The report fields are the Python runtime's, by the same names: PrivacyReport.to_dict() for
 * SanText and SanText+, MechanismReport.to_dict() without its prose fields for TEM and CusText(+).
 * `make npm` appends the LDP_E_* return codes (generated from ldptext-web.js) to this file. */

/** The mechanisms this build runs. CMP, Mahalanobis and DP-BART bundles are refused (LDP_E_MECHANISM). */
export type Mechanism = 'santext' | 'santext+' | 'tem' | 'custext' | 'custext+';

/** Mechanism names a pin may give (Python's ldptext.bundle.MECHANISMS). */
export type PinMechanism = Mechanism | 'dpbart' | 'cmp' | 'mahalanobis';

/** options.expect: Python's BundleExpectation, checked after verification. */
export interface Expectation {
  mechanism?: PinMechanism | PinMechanism[] | null;
  /** inclusive bounds on the stated per-token epsilon */
  epsilon_min?: number | null;
  epsilon_max?: number | null;
  /** 64 lowercase hex digits (LdpText.info.bundle_id) */
  bundle_id?: string | null;
  min_format_version?: number | null;
}

export interface OpenOptions {
  /** TESTS ONLY: a reproducible and NOT private sanitizer (Python's seed= gives the same output). */
  seed?: number | bigint | string | null;
  /** the application's pins on the publisher's bundles */
  expect?: Expectation | null;
  /** accept a near-identity bundle (median sensitive word released unchanged w.p. >= 0.9); refused
   * otherwise with LDP_E_WEAK_PRIVACY. Python's allow_weak_privacy=True. */
  allowWeakPrivacy?: boolean;
  /** the .wasm bytes, when the app loads them itself (first open only) */
  wasmBinary?: ArrayBuffer | Uint8Array;
  /** where the .wasm is served, when not next to the module (first open only) */
  locateFile?: (path: string, scriptDirectory: string) => string;
}

/** Fields every report has. */
interface ReportCommon {
  mechanism: Mechanism;
  /** 'MLDP', 'UMLDP', 'metric-LDP' or 'LDP within output sets' */
  notion: string;
  /** the stated per-token epsilon */
  epsilon: number;
  /** tokens released (token-level privacy never hides the length) */
  n_tokens: number;
  per_token_epsilon: number;
  /** n_tokens x epsilon: the ledger charge in ledger_unit */
  document_epsilon: number;
  /** "metric:<id>" or "partition:<id>" */
  ledger_unit: string;
  /** the LDP level per token over any two inputs; null where none exists (SanText+, CusText(+)) */
  worst_case_token_epsilon: number | null;
  worst_case_document_epsilon: number | null;
  /** what the worst case is, or why there is none */
  worst_case_note: string;
  numeric_tolerance: number;
  ratio_slack: number;
  /** probability that a keepable word is released unchanged (SanText+: 1 - p), null where none */
  kept_in_clear_probability: number | null;
  /** true: a seeded sanitizer, reproducible and NOT private */
  seeded: boolean;
  /** what sampled: the C library in wasm */
  backend: 'libldptext';
}

/** SanText and SanText+: Python's PrivacyReport.to_dict(), field for field. */
export interface PrivacyReport extends ReportCommon {
  mechanism: 'santext' | 'santext+';
  notion: 'MLDP' | 'UMLDP';
  /** SanText+: probability of re-drawing a non-sensitive word; null for SanText */
  p: number | null;
  /** ln(1/p) for SanText+, 0 for SanText */
  epsilon0: number;
  /** the stated bound on input distances */
  d_max: number;
  /** the bundle's stated rate of sensitive words released unchanged (median, largest) */
  verbatim_median: number | null;
  verbatim_max: number | null;
  /** a near-identity bundle (built only with --allow-weak-privacy) */
  weak_privacy: boolean;
}

/** TEM and CusText(+): Python's MechanismReport.to_dict() without neighbouring, metric, numeric_note. */
export interface MechanismReport extends ReportCommon {
  mechanism: 'tem' | 'custext' | 'custext+';
  parameters:
    | { epsilon: number; gamma: number | null; beta: number | null; d_max: number | null }
    | { epsilon: number; k: number | null; similarity: string | null; groups?: number };
}

export type Report = PrivacyReport | MechanismReport;

export interface Sanitized {
  /** the sanitized text: it may leave the device */
  text: string;
  report: Report;
}

/** ldp_bundle_info: the C library's facts about a verified bundle. */
export interface BundleInfo {
  bundle_id: string;
  key_id: string;
  mechanism: Mechanism;
  format_version: number;
  epsilon: number;
  epsilon0: number | null;
  p: number | null;
  d_max: number | null;
  tolerance: number;
  ledger_unit: string;
  worst_case_token_epsilon: number | null;
  worst_case_note: string;
  manifest: Record<string, unknown>;
  [fact: string]: unknown;
}

/** An error of the C library (code: its LDP_E_* value, message: ldp_strerror) or of this module. */
export class LdpTextError extends Error {
  constructor(code: number, message: string);
  readonly code: number;
}

/** A verified bundle that is not one the application pinned (options.expect). */
export class LdpTextExpectationError extends LdpTextError {
  constructor(code: number, message: string, pin: string);
  /** 'mechanism', 'min_format_version', 'bundle_id', 'epsilon_min' or 'epsilon_max' */
  readonly pin: string;
}

/** A verified bundle and one sanitizer over it (one random stream). */
export class LdpText {
  private constructor();
  /**
   * Verify a bundle (signature by one of trustedKeys, every hash, the tables) and make a sanitizer.
   * @param bundle the .ldpb bytes (copied)
   * @param trustedKeys the publisher's raw 32-byte Ed25519 public keys, or their base64
   * @throws LdpTextError, LdpTextExpectationError
   */
  static open(bundle: ArrayBuffer | ArrayBufferView, trustedKeys: Array<Uint8Array | string>,
    options?: OpenOptions): Promise<LdpText>;
  /** Sanitize one document (a well-formed string or UTF-8 bytes). */
  sanitize(text: string | Uint8Array): Sanitized;
  tokenize(text: string | Uint8Array): Int32Array;
  sampleIds(ids: Int32Array | number[]): Int32Array;
  detokenize(ids: Int32Array | number[]): string;
  /** Frees the wasm memory of this sanitizer and its bundle; later calls throw. Idempotent. */
  close(): void;
  readonly closed: boolean;
  readonly info: BundleInfo;
  readonly manifest: Record<string, unknown>;
  readonly mechanism: Mechanism;
  readonly epsilon: number;
  readonly epsilon0: number | null;
  readonly p: number | null;
  readonly dMax: number | null;
  readonly gamma: number | null;
  readonly beta: number | null;
  readonly k: number | null;
  readonly similarity: string | null;
  readonly ledgerUnit: string;
  readonly worstCaseTokenEpsilon: number | null;
  readonly worstCaseNote: string;
  readonly seeded: boolean;
}

/** The C library's version string (LDP_VERSION). */
export function version(options?: OpenOptions): Promise<string>;
/** Bytes of the wasm heap in use (diagnostics). */
export function heapInUse(options?: OpenOptions): Promise<number>;

/* The C library's return codes (include/ldptext.h): */
