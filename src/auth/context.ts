/** Who is calling, as established from a verified bearer token. */
export interface AuthContext {
  username: string;
  systemAdmin: boolean;
  /** Profile claims the token carried (undefined = not said). */
  profile: {
    email?: string;
    firstName?: string;
    lastName?: string;
    website?: string;
    emailVerified?: boolean;
  };
}
