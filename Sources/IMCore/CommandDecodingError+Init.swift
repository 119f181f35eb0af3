extension CommandDecodingError {
    /// For codecs outside IMCore (the protobuf codec in IMProto).
    public init(_ error: IMError, requestSerial: Int?) {
        self.init(error: error, requestSerial: requestSerial)
    }
}
