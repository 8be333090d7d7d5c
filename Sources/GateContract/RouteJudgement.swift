/// How a request on a route is judged: decided once, in `classify`, from the route's mode and
/// (gradual rollout) the request's arm; `decide` and everything after it only read it.
package struct RouteJudgement: Sendable, Hashable {
    package enum Mode: Sendable, Hashable {
        /// `mode: off`: forwarded as skipped, nothing verified.
        case passthrough
        /// Verified; forwarded whatever the outcome, with the outcome in the headers.
        case monitor
        /// Verified; refused unless it passes.
        case enforce
    }

    package var mode: Mode
    /// The request's arm on a route that rolls enforcement out gradually (`enforce_percent`
    /// below 100); nil elsewhere.
    package var arm: RolloutArm?

    package init(mode: Mode, arm: RolloutArm? = nil) {
        self.mode = mode
        self.arm = arm
    }

    /// Enforced on every request of the route: a request that cannot verify is refused from its
    /// head, before any body byte is read.
    package var refusesBeforeBody: Bool { self.mode == .enforce && self.arm == nil }
}
