/** Who is calling, as established from a verified bearer token or API key. */
export interface AuthContext {
  username: string;
  systemAdmin: boolean;
  /** Set when the caller sent an API key instead of a bearer token: the key's id. */
  apiKeyId?: string;
  /** Profile claims the token carried (undefined = not said). */
  profile: {
    email?: string;
    firstName?: string;
    lastName?: string;
    website?: string;
    emailVerified?: boolean;
  };
}
