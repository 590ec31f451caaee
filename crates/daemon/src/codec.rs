//! prost's codec, except that a request that is not a protobuf message at all is
//! INVALID_ARGUMENT (the caller's fault) rather than INTERNAL, as the API promises
//! for malformed requests.

use tonic::{
    codec::{BufferSettings, DecodeBuf},
    Code, Status,
};
use tonic_prost::ProstCodec;

/// The codec the generated client and server use (`codec_path` in build.rs).
pub struct Codec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Self(ProstCodec::default())
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as tonic::codec::Codec>::Encoder;
    type Decoder = Decoder<<ProstCodec<T, U> as tonic::codec::Codec>::Decoder>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        Decoder(self.0.decoder())
    }
}

/// Maps prost's decode failure to INVALID_ARGUMENT.
pub struct Decoder<D>(D);

impl<D> tonic::codec::Decoder for Decoder<D>
where
    D: tonic::codec::Decoder<Error = Status>,
{
    type Item = D::Item;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        self.0.decode(src).map_err(|s| {
            if s.code() == Code::Internal {
                Status::invalid_argument(format!(
                    "the message is not a valid cuzk.v1 protobuf message: {}",
                    s.message()
                ))
            } else {
                s
            }
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
